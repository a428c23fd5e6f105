"""`flowstate run --dry-run` on every shipped job: the plan and its estimate, no model started; a job
whose data is not fetched says so in one line. The calls a method makes of its own models come from
what it declares (``MethodSession.own_calls``; checked against the oracle's measured calls in
tests/pipeline/benchmarks/memoryarena/test_sweeps.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.cli.main import main
from pipeline.run.estimate import estimate
from pipeline.run.plan import plan_sweep
from tests.conftest import REPO_ROOT

JOBS = sorted((REPO_ROOT / "jobs").glob("*.yaml"))


@pytest.mark.parametrize("job", JOBS, ids=lambda path: path.name)
def test_every_shipped_job_dry_runs_or_names_the_data_to_fetch(job: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", str(job), "--out", str(tmp_path / "runs"), "--dry-run"])
    out, err = capsys.readouterr()
    if code == 2:  # a benchmark whose data this machine has not fetched (the paper's MemoryArena tasks)
        assert err.startswith("flowstate: error: ") and len(err.splitlines()) == 1, err
        assert "is missing" in err and "flowstate data fetch" in err
    else:
        assert code == 0, err
        assert "dry run: nothing started" in out and "total" in out
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("job", JOBS, ids=lambda path: path.name)
def test_without_data_every_shipped_job_says_what_to_fetch_in_one_line(
        job: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FLOWSTATE_DATA", str(tmp_path / "empty"))
    assert main(["run", str(job), "--out", str(tmp_path / "runs"), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("flowstate: error: ") and len(err.splitlines()) == 1, err
    assert str(tmp_path / "empty") in err and "flowstate data fetch" in err


def test_methods_that_call_models_of_their_own_are_estimated_with_those_calls(tmp_path: Path) -> None:
    """On the MemoryArena oracle job: Mem0, ReasoningBank and ZipAct's separate updater make more
    calls than the agent alone (Full Context's); methods that call no model of their own make exactly
    the agent's calls."""
    plan = plan_sweep(REPO_ROOT / "jobs" / "oracle-memoryarena.yaml", out=tmp_path)
    cells = {e.cell: e for e in estimate(plan.sweep, plan.sweep_dir, plan.done)}
    for domain in ("formal_reasoning_math", "group_travel_planner", "bundled_shopping"):
        calls = {method: cells[f"memoryarena.{domain}.{method}.oracle"].model_calls for method in (
            "full_context", "flowstate", "flowstate_no_psa", "bm25", "zipact", "zipact_bm25", "mem0", "reasoningbank",
            "zipact-separate")}
        tokens = {method: cells[f"memoryarena.{domain}.{method}.oracle"].tokens for method in ("bm25", "mem0", "reasoningbank")}
        for method in ("flowstate", "flowstate_no_psa", "bm25", "zipact", "zipact_bm25"):
            assert calls[method] == calls["full_context"], (domain, method)
        for method in ("mem0", "reasoningbank", "zipact-separate"):
            assert calls[method] > calls["full_context"], (domain, method)
        for method in ("mem0", "reasoningbank"):  # BM25's prompt, and the calls of their own models
            assert tokens[method] > tokens["bm25"], (domain, method)
