"""User errors around results folders are one line naming the file or path, exit status 2, never a
traceback: a hand-edited or cut manifest, an ``--out`` that cannot be what it must be, a results
folder that cannot be written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from pipeline.cli import main
from pipeline.manifest import MANIFEST
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
    assert not out.exists()
