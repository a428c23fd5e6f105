"""User errors around results folders are one line naming the file or path, exit status 2, never a
traceback: a hand-edited or cut manifest, an ``--out`` that cannot be what it must be, a results
folder that cannot be written."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline.cli.main import main
from pipeline.store.manifest import MANIFEST
from tests.pipeline.conftest import SMALL_ORACLE_JOB


def _one_line_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run a command that must fail as a user error; its message."""
    assert main(list(argv)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("flowstate: error: ") and len(err.splitlines()) == 1, err
    return err


@pytest.fixture
def runs(oracle_sweep: Path, tmp_path: Path) -> Path:
    """A copy of the session's oracle sweep under ``runs/``, with its job file beside it."""
    shutil.copytree(oracle_sweep, tmp_path / "runs" / oracle_sweep.name)
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(SMALL_ORACLE_JOB))
    return tmp_path / "runs"


EDITS = {
    "cut short": lambda text: text[: len(text) // 2],
    "job not an object": lambda text: json.dumps({**json.loads(text), "job": "x"}),
    "runs not a list": lambda text: json.dumps({**json.loads(text), "runs": 5}),
    "baseline not text": lambda text: json.dumps({**json.loads(text), "job": {
        **json.loads(text)["job"], "analysis": {"baseline": 7}}}),
}


@pytest.mark.parametrize("edit", EDITS)
def test_a_broken_manifest_is_one_line_for_every_command_that_reads_it(runs: Path, edit: str,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    [sweep] = runs.iterdir()
    manifest = sweep / MANIFEST
    manifest.write_text(EDITS[edit](manifest.read_text()))
    out = runs.parent / "out"
    commands = [("query", "pass_rate", "--runs", str(runs)), ("report", str(sweep), "--out", str(out / "r.md")),
                ("track", str(sweep)), ("grade", str(sweep)), ("export", "tau2", str(sweep), "--out", str(out / "x.json")),
                ("run", str(runs.parent / "job.yaml"), "--out", str(runs))]
    for argv in commands:
        assert str(manifest) in _one_line_error(capsys, *argv), argv
    assert not out.exists() or not any(out.iterdir())  # nothing written


def test_an_out_that_cannot_be_written_is_one_line(runs: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    [sweep] = runs.iterdir()
    a_file = tmp_path / "a-file"
    a_file.write_text("kept\n")
    job = str(tmp_path / "job.yaml")
    for out, why in ((a_file, "a-file is a file, not a folder"), (Path("/dev/null"), "/dev/null is a device"),
                     (a_file / "sub", "a-file is a file, not a folder"), (Path("/proc/no/such"), "No such file"),
                     (sweep, "is a sweep's own folder; give the folder that holds sweeps")):
        for dry_run in ([], ["--dry-run"]):
            if str(out).startswith("/proc") and dry_run:
                continue  # nothing is made in a dry run
            assert why in _one_line_error(capsys, "run", job, "--out", str(out), *dry_run)
    for out, why in ((Path("/dev/null"), "is a device; give the path of a file to write"),
                     (runs, "is a folder; give the path of a file to write"),
                     (a_file / "sub", "a-file is a file, not a folder"), (Path("/proc/no/such"), "No such file")):
        for argv in (("query", "pass_rate", "--runs", str(runs)), ("report", str(sweep)), ("export", "tau2", str(sweep))):
            assert why in _one_line_error(capsys, *argv, "--out", str(out)), argv
    assert a_file.read_text() == "kept\n" and Path("/dev/null").is_char_device()


@pytest.fixture
def read_only(runs: Path, tmp_path: Path) -> Path:
    """``runs`` seen through a read-only bind mount: read-only for root too (tests run as root)."""
    mount_point = tmp_path / "read-only"
    mount_point.mkdir()
    bound = subprocess.run(["mount", "--bind", str(runs), str(mount_point)], capture_output=True, text=True)
    if bound.returncode != 0:
        pytest.skip(f"cannot bind-mount a folder here (not root, or no CAP_SYS_ADMIN): {bound.stderr.strip()}; "
                    "test_a_refused_write_is_one_line covers the messages")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(mount_point)], check=True, capture_output=True)
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=True)


def test_commands_that_write_a_read_only_results_folder_say_so(read_only: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    [sweep] = read_only.iterdir()
    with pytest.raises(OSError, match="Read-only file system"):
        (sweep / "probe").touch()
    for argv in (("report", str(sweep)), ("compact", str(sweep)), ("track", str(sweep)), ("grade", str(sweep))):
        error = _one_line_error(capsys, *argv)
        assert "Read-only file system (EROFS)" in error and str(sweep) in error, argv
        assert "`report --out FILE` elsewhere only read it" in error
    assert main(["report", str(sweep), "--out", str(tmp_path / "report.md")]) == 0  # reading needs no write
    assert main(["query", "pass_rate", "--runs", str(read_only)]) == 0


@pytest.mark.parametrize("code", ["EROFS", "EACCES"])
def test_a_refused_write_is_one_line(runs: Path, tmp_path: Path, code: str, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The same, the refusal simulated where the store writes (pipeline/core/fault_injection.py), for every writer."""
    from tests.pipeline.analysis.conftest import build_scores_sweep

    [sweep] = runs.iterdir()
    unwritten = build_scores_sweep(tmp_path / "unwritten")  # per-episode files: compaction has work
    monkeypatch.chdir(tmp_path)  # MLflow's artifacts of a new experiment go under the working directory
    monkeypatch.setenv("FLOWSTATE_FAULT_WRITE", f"1:{code}:{tmp_path}/*")
    for argv in (("report", str(sweep)), ("compact", str(unwritten.sweep_dir)),
                 ("track", str(sweep), "--experiment", "refused-writes"), ("grade", str(sweep))):
        error = _one_line_error(capsys, *argv)
        assert f"({code})" in error and str(tmp_path) in error, argv


def test_a_user_error_is_one_line_and_a_bug_a_traceback(tmp_path: Path) -> None:
    """The CLI's one rule: a :class:`flowstate.FlowStateError` (whatever the layer that raised it) is one
    line with exit status 2; anything else is a bug, shown with its traceback, exit status 1."""
    script = ("import sys\nfrom pipeline.cli import main as cli\n"
              "def broken(args):\n    raise {error}\n"
              "cli._verify = broken\nsys.exit(cli.main(['verify', '.']))\n")
    user = subprocess.run([sys.executable, "-c", script.format(error="__import__('flowstate').FlowStateError('fix this')")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert (user.returncode, user.stderr) == (2, "flowstate: error: fix this\n")
    bug = subprocess.run([sys.executable, "-c", script.format(error="ZeroDivisionError('a bug')")],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert bug.returncode == 1
    assert "Traceback (most recent call last)" in bug.stderr and bug.stderr.rstrip().endswith("ZeroDivisionError: a bug")


def test_every_error_a_user_can_act_on_has_the_one_root() -> None:
    """The errors the pipeline raises for bad input, missing data or refused options all derive from
    :class:`flowstate.FlowStateError`, so that none of them prints a traceback."""
    from flowstate import FlowStateError, UnknownPluginError
    from flowstate.registry import PluginError
    from pipeline.analysis.query import QueryError
    from pipeline.analysis.report import ReportError
    from pipeline.cli.show import EpisodeNotFound
    from pipeline.config.sweep import SweepError
    from pipeline.config.variables import VariableError
    from pipeline.config.yaml_loader import ConfigError
    from pipeline.core.cli_hooks import CliError
    from pipeline.core.data import BenchmarkDataError
    from pipeline.core.disk_full import StorageError
    from pipeline.store.claim import ClaimLostError, SweepBusyError
    from pipeline.store.files import NoResultsError
    from pipeline.store.manifest import ManifestError
    from pipeline.store.output_paths import OutputPathError
    from pipeline.store.verify import RepairError

    for error in (QueryError, ReportError, EpisodeNotFound, SweepError, VariableError, ConfigError, CliError,
                  BenchmarkDataError, StorageError, ClaimLostError, SweepBusyError, NoResultsError, ManifestError,
                  OutputPathError, RepairError, PluginError, UnknownPluginError):
        assert issubclass(error, FlowStateError), error
