"""Runs a model server as its own process group and takes it down with the Ray actor that owns it.

``python -m pipeline.llm._supervise PARENT_PID -- ARGV...`` prints the server's pid, then waits.
An actor killed with SIGKILL runs no cleanup; this process notices (its parent changed), kills
the server's whole group and exits. If this process is itself killed, the kernel kills the
server (PR_SET_PDEATHSIG, safe here because this process has a single thread). It exits with the
server's status when the server ends on its own, and stops the group on SIGTERM.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

_PR_SET_PDEATHSIG = 1
_GRACE_S = 10.0


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def stop_group(proc: subprocess.Popen[bytes], grace_s: float = _GRACE_S) -> None:
    """SIGTERM the process group, SIGKILL whatever is left after ``grace_s``."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            os.killpg(proc.pid, signal.SIGKILL)  # stragglers of the group (engine workers)
        except subprocess.TimeoutExpired:
            continue
        except ProcessLookupError:
            pass
        return


def main() -> None:
    parent, separator, *argv = sys.argv[1:]
    if separator != "--" or not argv:
        raise SystemExit("usage: python -m pipeline.llm._supervise PARENT_PID -- ARGV...")
    server = subprocess.Popen(argv, stdout=sys.stderr, start_new_session=True, preexec_fn=_die_with_parent)
    print(server.pid, flush=True)

    def terminated(*_: object) -> None:
        stop_group(server)
        sys.exit(143)

    signal.signal(signal.SIGTERM, terminated)
    while server.poll() is None:
        if os.getppid() != int(parent):
            stop_group(server)
            break
        time.sleep(0.2)
    sys.exit(server.returncode if server.returncode is not None else 1)


if __name__ == "__main__":
    main()
