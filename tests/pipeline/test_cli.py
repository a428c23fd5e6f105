"""The `flowstate` command line, run as users run it."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO_ROOT


def flowstate(*args: str, cwd=REPO_ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_trace_replay_writes_the_result(tmp_path):
    out = tmp_path / "out.json"
    proc = flowstate("trace", "replay", "jobs/traces/hotel.json", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "replayed 3 requests, 8 steps" in proc.stdout
    result = json.loads(out.read_text())
    assert set(result) == {"steps", "repository", "index"}


def test_trace_replay_reports_bad_input_in_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    proc = flowstate("trace", "replay", str(bad), "--out", str(tmp_path / "o.json"))
    assert proc.returncode == 2 and "not valid JSON" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "o.json").exists()
