"""The commands the CLI's hints print work as typed: bare ``flowstate``/``mlflow`` where PATH finds
the ones that run, else their path (the environment not activated: `flowstate: command not found`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.core.commands import flowstate_command, mlflow_command

BIN = Path(sys.executable).parent  # the environment's scripts: flowstate, mlflow
BARE_PATH = "/usr/bin:/bin"  # a shell whose environment is not activated


def works_as_typed(command: str, path: str, cwd: Path) -> None:
    """The shell, with that PATH in that folder, finds the command's program (and it is that one)."""
    typed = subprocess.run(["/bin/sh", "-c", f"command -v {command}"], cwd=cwd, env={**os.environ, "PATH": path},
                           capture_output=True, text=True, timeout=10)
    assert typed.returncode == 0, typed.stderr
    assert (cwd / typed.stdout.strip()).samefile(BIN / Path(command).name)


def test_without_the_environment_on_path_the_hint_names_the_running_flowstate(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """`.venv/bin/flowstate ...` from a shell that has not activated the environment (the whole run as a
    user starts it: tests/pipeline/run/test_quiet_run.py)."""
    monkeypatch.setattr(sys, "argv", [str(BIN / "flowstate"), "run"])
    monkeypatch.setenv("PATH", BARE_PATH)
    monkeypatch.chdir(tmp_path)
    assert flowstate_command("report runs/x") == f"{BIN / 'flowstate'} report runs/x"
    works_as_typed(str(BIN / "flowstate"), BARE_PATH, tmp_path)


def test_under_the_current_folder_the_path_is_relative(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scripts = tmp_path / ".venv" / "bin"
    scripts.mkdir(parents=True)
    (scripts / "flowstate").symlink_to(BIN / "flowstate")
    monkeypatch.setattr(sys, "argv", [str(scripts / "flowstate"), "report"])
    monkeypatch.setenv("PATH", BARE_PATH)
    monkeypatch.chdir(tmp_path)
    assert flowstate_command("report runs/x") == ".venv/bin/flowstate report runs/x"
    works_as_typed(".venv/bin/flowstate", BARE_PATH, tmp_path)


def test_with_the_environment_activated_the_hint_is_the_bare_command(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    activated = f"{BIN}:{BARE_PATH}"
    monkeypatch.setattr(sys, "argv", [str(BIN / "flowstate"), "run"])
    monkeypatch.setenv("PATH", activated)
    assert flowstate_command("report runs/x") == "flowstate report runs/x"
    works_as_typed("flowstate", activated, tmp_path)


@pytest.mark.parametrize(("path", "expected"), [(BARE_PATH, str(BIN / "mlflow")), (f"{BIN}:{BARE_PATH}", "mlflow")],
                         ids=["not-activated", "activated"])
def test_mlflow_is_the_environment_s_own(path: str, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", path)
    monkeypatch.chdir(tmp_path)
    assert mlflow_command("ui --port 5000") == f"{expected} ui --port 5000"
    works_as_typed(expected, path, tmp_path)
