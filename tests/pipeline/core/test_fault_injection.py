"""The test hooks themselves: what their settings mean, and a clear error for a wrong one."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pipeline.core.atomic import write_text_atomic
from pipeline.core.fault_injection import CRASH_ENV, CRASH_EXIT_CODE, DRIVER_PID_ENV, FAULT_WRITE_ENV, actor_env, crash_point
from tests.conftest import REPO_ROOT


def test_a_crash_point_ends_the_process_the_nth_time_its_phase_is_reached():
    script = ("from pipeline.core.fault_injection import crash_point\n"
              "for i in range(5):\n"
              "    crash_point('grading'); crash_point('compaction'); print(i, flush=True)\n")
    ended = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
                           env={**os.environ, "PYTHONPATH": str(REPO_ROOT), CRASH_ENV: "compaction:3"})
    assert ended.returncode == CRASH_EXIT_CODE
    assert ended.stdout.split() == ["0", "1"]  # no cleanup, no exit handlers: the process just ends
    assert "crashing at compaction (3)" in ended.stderr


def test_wrong_settings_are_clear_errors(tmp_path, monkeypatch):
    monkeypatch.setenv(CRASH_ENV, "compation")
    with pytest.raises(ValueError, match="unknown phase 'compation' .*dispatch, write, compaction, grading, tracking"):
        crash_point("dispatch")
    monkeypatch.setenv(FAULT_WRITE_ENV, "1:ENOSPACE")
    with pytest.raises(ValueError, match="unknown errno 'ENOSPACE'"):
        write_text_atomic(tmp_path / "x", "x")


def test_the_actors_get_the_hooks_and_the_drivers_pid(monkeypatch):
    monkeypatch.delenv(FAULT_WRITE_ENV, raising=False)
    monkeypatch.delenv(CRASH_ENV, raising=False)
    assert actor_env() == {}  # no hook: the actors are started as always
    monkeypatch.setenv(FAULT_WRITE_ENV, "5:EIO")
    monkeypatch.setenv(CRASH_ENV, "write:2")
    assert actor_env() == {FAULT_WRITE_ENV: "5:EIO", CRASH_ENV: "write:2", DRIVER_PID_ENV: str(os.getpid())}
