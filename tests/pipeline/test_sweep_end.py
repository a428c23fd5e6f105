"""The end of a sweep: compaction that changes no answer, and the sweep in MLflow, read back through
MLflow's own API (real local Ray, real sqlite MLflow store)."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import pytest
import yaml
from mlflow import MlflowClient
from rich.console import Console

from pipeline import launch
from pipeline.analysis.catalog import list_queries
from pipeline.analysis.query import run_query
from pipeline.finish import finish_sweep
from tests.pipeline.conftest import SMALL_ORACLE_JOB

pytestmark = pytest.mark.slow


def answers(sweep_dir: Path) -> dict[str, list[dict]]:
    return {name: run_query(name, sweep_dir).to_pylist() for name in list_queries()}


def test_compaction_changes_no_answer_and_a_rerun_starts_nothing(ray_local, tmp_path, monkeypatch) -> None:
    job = tmp_path / "compact-me.yaml"
    job.write_text(yaml.safe_dump({**SMALL_ORACLE_JOB, "name": "compact-me"}))
    finish = launch.finish_sweep
    monkeypatch.setattr(launch, "finish_sweep", lambda sweep_dir, console, **options: (None, None, []))
    result = launch.run_sweep(job, out=tmp_path / "runs")
    assert result.completed == 8
    before = answers(result.sweep_dir)
    assert before["pass_rate"] and {r["pass_rate"] for r in before["pass_rate"]} == {1.0}

    run_id, _, errors = finish(result.sweep_dir, Console())  # what the end of a sweep does: compact, then log
    assert errors == []
    files = list(result.sweep_dir.rglob("*.parquet"))
    assert files and all(f.name.startswith("part-") for f in files)
    assert answers(result.sweep_dir) == before

    monkeypatch.setattr(launch, "finish_sweep", finish)
    again = launch.run_sweep(job, out=tmp_path / "runs")
    assert (again.skipped, again.completed, again.failed) == (8, 0, 0)
    assert again.mlflow_run_id == run_id  # the sweep's parent run is reused
    assert answers(result.sweep_dir) == before


def test_the_oracle_sweep_is_in_mlflow(oracle_sweep: Path, mlflow_store: str) -> None:
    client = MlflowClient(mlflow_store)
    experiment = client.get_experiment_by_name(SMALL_ORACLE_JOB["name"])
    manifest = json.loads((oracle_sweep / "manifest.json").read_text())
    parent = client.get_run(manifest["mlflow_run_id"])
    assert parent.info.experiment_id == experiment.experiment_id and parent.info.status == "FINISHED"
    assert parent.data.params["sweep_id"] == manifest["sweep_id"] == oracle_sweep.name
    assert parent.data.params["deployment.oracle.kind"] == "scripted"
    assert parent.data.params["versions.duckdb"] == manifest["versions"]["duckdb"]
    assert parent.data.tags["flowstate.parquet_path"] == str(oracle_sweep.resolve())

    children = client.search_runs([experiment.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    cells = {(c.data.tags["domain"], c.data.tags["method"]) for c in children}
    assert cells == {(d, m) for d in ("airline", "retail") for m in ("flowstate", "full_context")}
    for child in children:
        assert child.data.metrics["pass_rate"] == 1.0 and child.data.metrics["episodes"] == 2
        if child.data.tags["method"] == "flowstate":  # the oracle records states and discloses them later
            assert child.data.metrics["isu.accepted"] > 0 and child.data.metrics["psa.disclosed"] > 0
            assert child.data.metrics["vs_baseline.d_pass_rate"] == 0.0

    listed = {f.path for folder in ("config", "summary", "report") for f in client.list_artifacts(parent.info.run_id, folder)}
    assert {"config/manifest.json", "config/small-oracle.yaml", "summary/pass_rate.csv", "report/report.md"} <= listed

    mlflow.flush_trace_async_logging()
    traces = mlflow.search_traces(locations=[experiment.experiment_id], return_type="list")
    assert len(traces) == 8  # default 3 samples per cell; each cell has 2 episodes
    spans = [s.name for t in traces for s in t.data.spans]
    steps = sum(r["steps"] for r in run_query("active_state", oracle_sweep).to_pylist())
    assert spans.count("model call") == steps > 0  # one span per model call of each sampled episode


def test_a_tracking_store_that_fails_loses_nothing(oracle_sweep: Path, tmp_path, monkeypatch) -> None:
    import shutil

    sweep_dir = tmp_path / oracle_sweep.name
    shutil.copytree(oracle_sweep, sweep_dir)
    before = answers(sweep_dir)
    (tmp_path / "a-file").write_text("")  # a store MLflow cannot create: its folder is a file
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'a-file' / 'mlflow.db'}")
    run_id, _, errors = finish_sweep(sweep_dir, Console())
    [error] = errors
    assert error.startswith("MLflow logging failed") and f"flowstate track {sweep_dir}" in error
    assert run_id is None and answers(sweep_dir) == before
