"""Live MLflow tracking of a running sweep, driven here without Ray: the plan of a real job, episode
summaries fed as the dispatcher feeds them, the session's real sqlite store read back through
MLflow's API."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from mlflow import MlflowClient
from mlflow.entities import Run

from pipeline.run.actors import EpisodeSummary
from pipeline.run.live_tracking import FAILED, KILLED, LiveTracking
from pipeline.run.manifest import write_manifest
from pipeline.run.plan import Plan, plan_sweep
from pipeline.store.manifest import read_manifest
from tests.pipeline.conftest import SMALL_ORACLE_JOB

EVERY_S = 0.1
DEPLOYMENTS = {"oracle": {"kind": "scripted", "name": "oracle"}}


def eventually(check: Callable[[], Any], timeout_s: float = 30.0) -> Any:
    """The first truthy value of ``check`` (the store is written by a background thread)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def planned(tmp_path: Path, name: str) -> Plan:
    job = tmp_path / f"{name}.yaml"
    job.write_text(yaml.safe_dump({**SMALL_ORACLE_JOB, "name": name, "tracking": {"live_every_s": EVERY_S}}))
    plan = plan_sweep(job, out=tmp_path / "runs")
    write_manifest(plan.sweep, plan.sweep_dir, job_path=job, unfinished=True)  # as the run does first
    return plan


def summary(episode_id: str, reward: float | None = 1.0) -> EpisodeSummary:
    return EpisodeSummary(episode_id=episode_id, status="completed" if reward is not None else "grading_failed",
                          termination="user_stop", reward=reward, steps=4, duration_s=2.0)


def parent_of(client: MlflowClient, live: LiveTracking) -> Run | None:
    return client.get_run(live.parent_id) if live.parent_id else None


def children(client: MlflowClient, parent: Run) -> dict[str, Run]:
    found = client.search_runs([parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    return {r.data.tags["flowstate.cell_id"]: r for r in found}


@pytest.fixture
def client(mlflow_store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> MlflowClient:
    monkeypatch.chdir(tmp_path)  # new experiments keep their artifacts under the test's folder
    return MlflowClient(mlflow_store)


def test_the_runs_open_running_with_the_job_and_the_plan_and_metrics_arrive_in_batches(
        tmp_path: Path, client: MlflowClient) -> None:
    plan = planned(tmp_path, "live-open")
    started_at = datetime.now(UTC)
    warnings: list[str] = []
    live = LiveTracking(plan, started_at=started_at, warn=warnings.append)
    try:
        assert live.parent_id is None and not live._thread.is_alive()  # nothing opens while Ray and the models start
        live.start(DEPLOYMENTS)
        parent = eventually(lambda: parent_of(client, live))
        assert parent.info.status == "RUNNING" and parent.info.start_time == int(started_at.timestamp() * 1000)
        assert parent.data.params["sweep_id"] == plan.sweep.sweep_id and parent.data.params["seed"] == "300"
        assert parent.data.params["deployment.oracle.kind"] == "scripted"
        assert parent.data.metrics["plan.episodes_to_run"] == 8 and parent.data.metrics["plan.cells"] == 4
        listed = {f.path for f in client.list_artifacts(parent.info.run_id, "config")}
        assert {"config/plan.json", "config/manifest.json", "config/live-open.yaml", "config/resolved_job.json"} <= listed
        cells = eventually(lambda: len(runs := children(client, parent)) == 4 and runs)
        assert {r.info.status for r in cells.values()} == {"RUNNING"}

        first, second = (c for c in plan.sweep.cells if c.domain == "airline")
        specs = [s for s in plan.todo if s.cell.cell_id == first.cell_id]
        live.episode(specs[0], summary(specs[0].episode_id, 1.0))  # fed at once, as a burst of results is
        live.episode(specs[1], summary(specs[1].episode_id, 0.0))
        other = next(s for s in plan.todo if s.cell.cell_id == second.cell_id)
        live.episode(other, None)  # an infrastructure failure
        cell_run = cells[first.cell_id].info.run_id

        def pushed() -> dict[str, float]:
            metrics = client.get_run(cell_run).data.metrics
            return metrics if metrics.get("live.episodes_done") == 2 else {}

        metrics = eventually(pushed)
        assert metrics["live.pass_rate"] == 0.5 and metrics["live.completed"] == 2 and metrics["live.failed"] == 0
        assert metrics["live.episodes_planned"] == 2 and metrics["live.mean_steps"] == 4
        assert len(client.get_metric_history(cell_run, "live.episodes_done")) <= 2  # batched, not one per episode
        failed = eventually(lambda: client.get_run(cells[second.cell_id].info.run_id).data.metrics.get("live.failed"))
        assert failed == 1
        totals = eventually(lambda: (m := client.get_run(parent.info.run_id).data).metrics.get(
            "live.episodes_done") == 3 and m)
        assert totals.metrics["live.failed"] == 1
    finally:
        live.close()
    assert client.get_run(parent.info.run_id).info.status == "RUNNING"  # the end-of-sweep logging ends it
    assert read_manifest(plan.sweep_dir)["mlflow_run_id"] == parent.info.run_id
    assert warnings == []


@pytest.mark.parametrize(("status", "models_up"), [(KILLED, True), (FAILED, True), (FAILED, False)])
def test_an_early_end_ends_every_run_with_its_status(tmp_path: Path, client: MlflowClient, status: str,
                                                     models_up: bool) -> None:
    plan = planned(tmp_path, f"live-{status.lower()}-{models_up}")
    live = LiveTracking(plan, started_at=datetime.now(UTC), warn=pytest.fail)
    spec = plan.todo[0]
    if models_up:
        live.start(DEPLOYMENTS)
        live.episode(spec, summary(spec.episode_id))
    live.close(status)  # models that never came up: the runs open here, to end
    parent = client.get_run(live.parent_id)
    assert parent.info.status == status and parent.info.end_time >= parent.info.start_time
    cells = children(client, parent)
    assert len(cells) == 4 and {r.info.status for r in cells.values()} == {status}
    if models_up:
        assert cells[spec.cell.cell_id].data.metrics["live.episodes_done"] == 1  # the last push came first


def test_a_resume_reopens_the_same_parent(tmp_path: Path, client: MlflowClient) -> None:
    plan = planned(tmp_path, "live-resume")
    first = LiveTracking(plan, started_at=datetime.now(UTC), warn=pytest.fail)
    first.start(DEPLOYMENTS)
    done = [s for s in plan.todo if s.cell.domain == "airline"]
    for spec in done:
        first.episode(spec, summary(spec.episode_id))
    first.close(KILLED)
    parent = client.get_run(first.parent_id)

    resumed = plan.model_copy(update={"done": frozenset(s.episode_id for s in done)})
    second = LiveTracking(resumed, started_at=datetime.now(UTC), warn=pytest.fail)
    second.start(DEPLOYMENTS)
    try:
        assert eventually(lambda: second.parent_id) == first.parent_id
        again = eventually(lambda: (r := client.get_run(first.parent_id)).info.status == "RUNNING" and r)
        assert again.info.start_time == parent.info.start_time  # the sweep's first start
        assert again.data.metrics["plan.episodes_done"] == 4 and again.data.metrics["plan.episodes_to_run"] == 4
        cells = children(client, again)
        assert len(cells) == 4  # no second set of cell runs
        statuses = {c.domain: cells[c.cell_id].info.status for c in plan.sweep.cells}
        assert statuses == {"airline": "KILLED", "retail": "RUNNING"}  # only cells with episodes to run reopen
    finally:
        second.close(KILLED)


@contextmanager
def locked(store_uri: str) -> Iterator[None]:
    """Another writer holds the sqlite store: MLflow waits for it (5 s), then fails ("database is locked")."""
    con = sqlite3.connect(store_uri.removeprefix("sqlite:///"), isolation_level=None)
    con.execute("BEGIN EXCLUSIVE")
    try:
        yield
    finally:
        con.execute("ROLLBACK")
        con.close()


@pytest.mark.slow
def test_a_store_that_fails_neither_stops_nor_slows_the_driver_and_later_pushes_catch_up(
        tmp_path: Path, client: MlflowClient, mlflow_store: str) -> None:
    plan = planned(tmp_path, "live-failing-store")
    warnings: list[str] = []
    with locked(mlflow_store):
        live = LiveTracking(plan, started_at=datetime.now(UTC), warn=warnings.append)
        live.start(DEPLOYMENTS)
        for spec in plan.todo:
            live.episode(spec, summary(spec.episode_id))
        assert not warnings  # the driver went on while the first push still waits on the locked store
        assert eventually(lambda: warnings, timeout_s=60)
        assert eventually(lambda: live.failed_pushes >= 3, timeout_s=120)  # more pushes fail, without more warnings
    assert len(warnings) == 1 and "database is locked" in warnings[0] and "flowstate track" in warnings[0]
    parent = eventually(lambda: parent_of(client, live))  # the next push opens the runs after all
    live.close()
    cells = children(client, client.get_run(parent.info.run_id))
    assert {r.data.metrics.get("live.episodes_done") for r in cells.values()} == {2.0}
    assert client.get_run(parent.info.run_id).data.metrics["live.episodes_done"] == 8
