"""Test hooks: a disk that fills up, a driver that dies and one that is told to stop, at a chosen
moment. Off unless set.

All are read from the environment, so they reach a ``flowstate run`` started as a subprocess and,
through :func:`actor_env`, its Ray actors; counts are per process (each actor counts its own) and
per value (a new value counts from zero).

- ``FLOWSTATE_FAULT_WRITE="<n>:<ERRNO>[:<glob>]"``: the n-th write of the store's file layer
  (:mod:`pipeline.core.atomic`) in this process and every later one fail with ``OSError(ERRNO)``, as a
  full disk would; with ``glob`` (``fnmatch`` on the whole path), only writes to matching paths
  count and fail. ``ERRNO`` is a name (``ENOSPC``, ``EIO``, ``EROFS``, ``EDQUOT``) or a number.
- ``FLOWSTATE_CRASH_AT="<phase>[:<n>]"``: the n-th time (default 1) this process reaches ``phase``
  it ends at once with ``os._exit(97)``: no cleanup, no ``finally``, as after a SIGKILL. The phases
  that happen in an actor (``write``, ``grading``) SIGKILL the driver first: the test is of a sweep
  whose driver died there.
- ``FLOWSTATE_SIGNAL_AT="<phase>[:<n>][:<SIGNAL>]"``: the n-th time (default 1) this process
  reaches ``phase`` it sends its driver SIGNAL (default SIGTERM, as a scheduler would; SIGSTOP
  pauses it, as a paused VM) and goes on; at ``starting`` the signal is sent once ``ray.init`` has
  installed its own SIGTERM handler, so it arrives while Ray starts.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Literal, get_args

FAULT_WRITE_ENV = "FLOWSTATE_FAULT_WRITE"
CRASH_ENV = "FLOWSTATE_CRASH_AT"
SIGNAL_ENV = "FLOWSTATE_SIGNAL_AT"
# The driver's pid, for a crash point reached in an actor (set by :func:`actor_env`).
DRIVER_PID_ENV = "FLOWSTATE_CRASH_DRIVER_PID"
CRASH_EXIT_CODE = 97

# Where the driver can die: Ray about to start (starting), an episode's result just collected
# (dispatch), between two files of an episode (write, in the actor), a compacted part visible but
# its inputs not yet deleted (compaction), an episode about to be graded (grading, in the actor), a
# cell's MLflow run logged but not the next (tracking).
Phase = Literal["starting", "dispatch", "write", "compaction", "grading", "tracking"]
PHASES: tuple[Phase, ...] = get_args(Phase)

_counts: dict[str, int] = {}  # setting -> times its phase (or a matching write) was reached


def actor_env() -> dict[str, str]:
    """The hooks' variables for the actors of this driver (empty when none is set)."""
    env = {name: os.environ[name] for name in (FAULT_WRITE_ENV, CRASH_ENV, SIGNAL_ENV) if os.environ.get(name)}
    if CRASH_ENV in env or SIGNAL_ENV in env:
        env[DRIVER_PID_ENV] = os.environ.get(DRIVER_PID_ENV) or str(os.getpid())
    return env


def _parse_errno(text: str) -> int:
    code = int(text) if text.isdigit() else getattr(errno, text, None)
    if not isinstance(code, int):
        raise ValueError(f"{FAULT_WRITE_ENV}: unknown errno {text!r} (e.g. ENOSPC, EIO, EROFS, EDQUOT)")
    return code


def check_write(path: Path) -> None:
    """Raise the injected ``OSError`` if this write of ``path`` is one that must fail."""
    setting = os.environ.get(FAULT_WRITE_ENV)
    if not setting:
        return
    n, code, *glob = setting.split(":", 2)
    if glob and not fnmatch.fnmatch(str(path), glob[0]):
        return
    count = _counts[setting] = _counts.get(setting, 0) + 1
    if count >= int(n):
        number = _parse_errno(code)
        raise OSError(number, os.strerror(number), str(path))


def crash_point(phase: Phase) -> None:
    """End this process here (and its driver, from an actor) if ``FLOWSTATE_CRASH_AT`` names this
    phase and this is its n-th time; send the driver SIGTERM if ``FLOWSTATE_SIGNAL_AT`` does."""
    driver = int(os.environ.get(DRIVER_PID_ENV) or os.getpid())
    if (count := _reached(SIGNAL_ENV, phase)) is not None:
        sent = signal.Signals[(os.environ[SIGNAL_ENV].split(":")[2:] or ["SIGTERM"])[0]]
        print(f"flowstate: test hook {SIGNAL_ENV}: {sent.name} at {phase} ({count})", file=sys.stderr, flush=True)
        if phase == "starting":
            threading.Thread(target=_signal_once_replaced, args=(driver, sent, signal.getsignal(signal.SIGTERM)),
                             daemon=True).start()
        else:
            os.kill(driver, sent)
    if (count := _reached(CRASH_ENV, phase)) is not None:
        print(f"flowstate: test hook {CRASH_ENV}: crashing at {phase} ({count})", file=sys.stderr, flush=True)
        if driver != os.getpid():
            os.kill(driver, signal.SIGKILL)
        os._exit(CRASH_EXIT_CODE)


def _reached(variable: str, phase: Phase) -> int | None:
    """How many times ``phase`` was reached, if the hook set in ``variable`` fires now."""
    setting = os.environ.get(variable)
    if not setting:
        return None
    wanted, _, rest = setting.partition(":")
    n = rest.partition(":")[0]
    if wanted not in PHASES:
        raise ValueError(f"{variable}: unknown phase {wanted!r} (one of {', '.join(PHASES)})")
    if wanted != phase:
        return None
    key = f"{variable}={setting}"
    count = _counts[key] = _counts.get(key, 0) + 1
    return count if count == int(n or 1) else None


def _signal_once_replaced(driver: int, sent: signal.Signals, handler: object, limit_s: float = 60) -> None:
    """``sent`` to ``driver`` once the SIGTERM handler is no longer ``handler`` (``ray.init`` has
    installed its own), or after ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while signal.getsignal(signal.SIGTERM) is handler and time.monotonic() < deadline:
        time.sleep(0.001)
    os.kill(driver, sent)


def wait_until_settled(sweep_dir: Path, quiet_s: float = 1.5, limit_s: float = 60) -> None:
    """After a driver died (a crash point, a SIGKILL): until no file of the sweep changed for
    ``quiet_s``, since Ray ends a dead driver's actors soon, not at once."""
    def listing() -> set[tuple[str, int]]:
        return {(str(p), p.stat().st_size) for p in sweep_dir.rglob("*") if p.is_file()} if sweep_dir.exists() else set()

    deadline, before = time.monotonic() + limit_s, listing()
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        if (now := listing()) == before:
            return
        before = now
