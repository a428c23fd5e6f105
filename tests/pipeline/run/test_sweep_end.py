"""The end of a sweep: compaction that changes no answer, and the sweep in MLflow, read back through
MLflow's own API (real local Ray, real sqlite MLflow store)."""

from __future__ import annotations

import io
import json
import os
import signal
from collections.abc import Callable
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from typing import Any

import mlflow
import pytest
import yaml
from mlflow import MlflowClient
from mlflow.entities import Run
from rich.console import Console

from pipeline.analysis.catalog import list_queries
from pipeline.analysis.query import run_query
from pipeline.run import launch
from pipeline.run.finish import finish_sweep
from pipeline.run.live_tracking import LiveTracking
from pipeline.run.stopping import STOP_REQUESTED, request_stop
from pipeline.store.manifest import read_manifest
from tests.pipeline.analysis.test_live import eventually, locked
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


# -- live tracking: the runs while the sweep runs, and how they end -----------------------------------

def live_job(tmp_path: Path, name: str, concurrency: int = 8) -> Path:
    job = tmp_path / f"{name}.yaml"
    job.write_text(yaml.safe_dump({**SMALL_ORACLE_JOB, "name": name, "tracking": {"live_every_s": 0.1},
                                   "execution": {"concurrency": concurrency}}))
    return job


def on_episode(monkeypatch: pytest.MonkeyPatch, react: Callable[[LiveTracking, int], None]) -> None:
    """Call ``react`` after the driver told the live tracking of its n-th finished episode (the
    dispatch loop waits meanwhile: the episodes not yet collected cannot count)."""
    original, count = LiveTracking.episode, [0]

    def episode(self: LiveTracking, spec: Any, summary: Any) -> None:
        original(self, spec, summary)
        count[0] += 1
        react(self, count[0])

    monkeypatch.setattr(LiveTracking, "episode", episode)


def cell_runs(client: MlflowClient, parent: str) -> list[Run]:
    return client.search_runs([client.get_run(parent).info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent}'")


def ms(timestamp: str) -> int:
    return int(datetime.fromisoformat(timestamp).timestamp() * 1000)


def test_a_running_sweep_is_live_in_mlflow_and_its_parent_run_spans_it(ray_local, tmp_path, monkeypatch,
                                                                       mlflow_store) -> None:
    monkeypatch.chdir(tmp_path)  # the experiment's artifacts go under the test's folder
    client, seen = MlflowClient(mlflow_store), {}

    def react(live: LiveTracking, n: int) -> None:
        if n == 4:  # half the episodes collected; the sweep cannot end before this returns
            parent = eventually(lambda: live.parent_id)
            seen["cells"] = eventually(lambda: [r for r in cell_runs(client, parent)
                                                if r.data.metrics.get("live.episodes_done")])
            seen["parent"] = client.get_run(parent)

    on_episode(monkeypatch, react)
    result = launch.run_sweep(live_job(tmp_path, "live-sweep"), out=tmp_path / "runs")
    assert result.completed == 8 and not result.finish_errors
    during = seen["parent"]
    assert during.info.run_id == result.mlflow_run_id and during.info.status == "RUNNING"
    assert during.data.params["sweep_id"] == result.sweep_id and during.data.metrics["plan.episodes_to_run"] == 8
    assert seen["cells"] and {c.info.status for c in seen["cells"]} == {"RUNNING"}
    assert sum(c.data.metrics["live.episodes_done"] for c in seen["cells"]) <= 4

    parent = client.get_run(result.mlflow_run_id)
    run = read_manifest(result.sweep_dir)["runs"][-1]
    assert parent.info.status == "FINISHED"
    assert parent.info.start_time == ms(run["started_at"]) and parent.info.end_time >= ms(run["finished_at"])
    assert parent.info.end_time - parent.info.start_time >= result.duration_s * 1000
    cells = cell_runs(client, result.mlflow_run_id)
    assert len(cells) == 4 and {c.info.status for c in cells} == {"FINISHED"}
    for cell in cells:  # the live metrics, then the full SQL metrics at the end
        assert cell.data.metrics["live.episodes_done"] == 2 and cell.data.metrics["live.pass_rate"] == 1.0
        assert cell.data.metrics["pass_rate"] == 1.0 and cell.data.metrics["episodes"] == 2


def test_a_stopped_sweep_ends_killed_and_its_resume_reopens_the_same_runs(ray_local, tmp_path, monkeypatch,
                                                                          mlflow_store) -> None:
    monkeypatch.chdir(tmp_path)
    # one episode at a time: the stop leaves exactly 6 to run
    client, job = MlflowClient(mlflow_store), live_job(tmp_path, "live-stopped", concurrency=1)
    on_episode(monkeypatch, lambda live, n: n == 2 and os.kill(os.getpid(), signal.SIGTERM))  # a scheduler stops it
    previous = signal.signal(signal.SIGTERM, request_stop)  # as `flowstate run` does
    try:
        first = launch.run_sweep(job, out=tmp_path / "runs")
    finally:
        signal.signal(signal.SIGTERM, previous)
        STOP_REQUESTED.clear()
    assert first.interrupted and first.completed == 2
    manifest = read_manifest(first.sweep_dir)
    parent_id = manifest["mlflow_run_id"]
    parent = client.get_run(parent_id)
    assert parent.info.status == "KILLED" and parent.info.start_time == ms(manifest["runs"][-1]["started_at"])
    assert {c.info.status for c in cell_runs(client, parent_id)} == {"KILLED"}

    seen: dict[str, str] = {}
    on_episode(monkeypatch, lambda live, n: n == 1 and seen.setdefault(
        "status", eventually(lambda: live.parent_id and client.get_run(live.parent_id).info.status == "RUNNING")))
    second = launch.run_sweep(job, out=tmp_path / "runs")
    assert (second.skipped, second.completed) == (2, 6) and second.mlflow_run_id == parent_id
    assert seen["status"]  # reopened RUNNING while the resume ran
    again = client.get_run(parent_id)
    assert again.info.status == "FINISHED" and again.info.start_time == parent.info.start_time
    cells = cell_runs(client, parent_id)
    assert len(cells) == 4 and {c.info.status for c in cells} == {"FINISHED"}
    assert {c.data.metrics["episodes"] for c in cells} == {2}


def test_a_sweep_that_raises_ends_failed(ray_local, tmp_path, monkeypatch, mlflow_store) -> None:
    monkeypatch.chdir(tmp_path)

    def react(live: LiveTracking, n: int) -> None:
        if n == 2:
            raise RuntimeError("the driver broke")

    on_episode(monkeypatch, react)
    with pytest.raises(RuntimeError, match="the driver broke"):
        launch.run_sweep(live_job(tmp_path, "live-failed"), out=tmp_path / "runs")
    [sweep_dir] = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    client = MlflowClient(mlflow_store)
    parent_id = read_manifest(sweep_dir)["mlflow_run_id"]
    assert client.get_run(parent_id).info.status == "FAILED"
    assert {c.info.status for c in cell_runs(client, parent_id)} == {"FAILED"}


def test_a_store_that_fails_mid_sweep_loses_nothing(ray_local, tmp_path, monkeypatch, mlflow_store) -> None:
    monkeypatch.chdir(tmp_path)
    store, out = ExitStack(), io.StringIO()

    def react(live: LiveTracking, n: int) -> None:
        if n == 2:  # another writer takes the store: MLflow calls wait 5 s, then fail
            store.enter_context(locked(mlflow_store))
        if n == 3:  # until the live tracking has met the failure; then the store comes back
            assert eventually(lambda: "MLflow live tracking failed" in out.getvalue(), timeout_s=60)
            store.close()

    on_episode(monkeypatch, react)
    with store:
        result = launch.run_sweep(live_job(tmp_path, "live-store-fails"), out=tmp_path / "runs",
                                  console=Console(file=out, width=400))
    assert result.completed == 8 and not result.finish_errors
    assert out.getvalue().count("MLflow live tracking failed") == 1 and "database is locked" in out.getvalue()
    client = MlflowClient(mlflow_store)
    assert client.get_run(result.mlflow_run_id).info.status == "FINISHED"
    cells = cell_runs(client, result.mlflow_run_id)
    assert len(cells) == 4 and {c.info.status for c in cells} == {"FINISHED"}
    for cell in cells:  # the end of the sweep caught up with everything
        assert cell.data.metrics["episodes"] == 2 and cell.data.metrics["pass_rate"] == 1.0
        assert cell.data.metrics["live.episodes_done"] == 2
