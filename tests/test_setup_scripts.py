"""The setup scripts say what they do: a line before each step, and a line every interval through a step
that pip keeps silent (a compile of llama-cpp-python: 7-15 minutes on 2 cores, the first time)."""

from __future__ import annotations

import os
import re
import subprocess

from tests.conftest import REPO_ROOT


def steps(script: str, every_s: float = 0.2) -> subprocess.CompletedProcess[str]:
    """``script`` run by bash after sourcing scripts/steps.sh, with a heartbeat every ``every_s``; its
    output read to the end (which a process left holding it would delay past the timeout)."""
    return subprocess.run(["bash", "-c", f"source scripts/steps.sh && {script}"], cwd=REPO_ROOT, text=True,
                          capture_output=True, timeout=20, env={**os.environ, "FLOWSTATE_SETUP_HEARTBEAT_S": str(every_s)})


def test_a_long_step_says_every_interval_that_it_is_still_running() -> None:
    proc = steps('step "compiling"; with_heartbeat "compiling" sleep 1; echo "status $?"')
    assert proc.stdout == "status 0\n"
    first, *beats = proc.stderr.splitlines()
    assert first == "setup: compiling" and len(beats) >= 2
    assert {re.sub(r"\d+ min \d+ s", "M min S s", line) for line in beats} == {
        "setup: compiling: still running, M min S s so far"}


def test_a_failing_step_keeps_its_status_and_its_heartbeat_ends() -> None:
    """`wait` returns once every background job of the shell has ended, and the output is read to its end
    once no process holds it: a heartbeat (or its minute's pause) left running would hang either."""
    proc = steps('with_heartbeat "installing" bash -c "exit 3"; echo "status $?"; wait; echo "no heartbeat left"',
                 every_s=60)
    assert proc.stdout == "status 3\nno heartbeat left\n"
