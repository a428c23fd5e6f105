"""The setup scripts say what they do: a line before each step, and a line a minute through a step that
pip keeps silent (a compile of llama-cpp-python: 7-15 minutes on 2 cores, the first time)."""

from __future__ import annotations

import os
import re
import subprocess

from tests.conftest import REPO_ROOT


def steps(script: str) -> subprocess.CompletedProcess[str]:
    """``script`` run by bash after sourcing scripts/steps.sh, with a heartbeat every second."""
    return subprocess.run(["bash", "-c", f"source scripts/steps.sh && {script}"], cwd=REPO_ROOT, text=True,
                          capture_output=True, timeout=30, env={**os.environ, "FLOWSTATE_SETUP_HEARTBEAT_S": "1"})


def test_a_long_step_says_every_interval_that_it_is_still_running() -> None:
    proc = steps('step "compiling"; with_heartbeat "compiling" sleep 2.5; echo "status $?"')
    assert proc.stdout == "status 0\n"
    lines = proc.stderr.splitlines()
    assert lines[0] == "setup: compiling"
    assert [re.sub(r"\d+ s", "N s", line) for line in lines[1:]] == ["setup: compiling: still running, 0 min N s so far"] * 2


def test_a_failing_step_fails_the_script_and_its_heartbeat_stops() -> None:
    proc = steps('with_heartbeat "installing" bash -c "exit 3"; echo "status $?"; sleep 1.5')
    assert proc.stdout == "status 3\n" and "still running" not in proc.stderr
