"""Sweeps end to end on a real local Ray: in-process and over HTTP, resume, crashes, bad inputs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from pipeline.cli.show import load_episode, render
from pipeline.config.job import load_job
from pipeline.config.sweep import expand
from pipeline.llm.kinds.replica_sim.server import StubServer
from pipeline.run.launch import run_sweep
from pipeline.store.claim import claim_path
from pipeline.store.compact import compact
from pipeline.store.reader import finished_episodes
from pipeline.testing.oracle_server import OracleResponder
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow


def write_job(tmp_path: Path, *, agent_deployment: dict, name: str = "e2e", tasks: int = 4,
              methods: list | None = None, execution: dict | None = None) -> Path:
    job = {
        "name": name,
        "benchmarks": [{"benchmark": "taubench", "domain": "airline", "limit": tasks, "reward_basis": "classic"},
                       {"benchmark": "taubench", "domain": "retail", "limit": tasks, "reward_basis": "classic"}],
        "methods": methods or [{"name": "flowstate"}, {"name": "full_context", "protocol": "json"}],
        "agents": [{"deployment": "agent"}],
        "user_simulator": "scripted",
        "judge": "none",
        "deployments": {"agent": agent_deployment},
        "execution": execution or {"concurrency": 8},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def table(sweep_dir: Path, name: str, select: str = "*", group_by: str = "") -> list[tuple]:
    glob = str(sweep_dir / name / "**" / "*.parquet")
    query = f"SELECT {select} FROM read_parquet('{glob}', union_by_name = true, hive_partitioning = false)"
    return duckdb.sql(query + (f" GROUP BY {group_by}" if group_by else "")).fetchall()


def assert_all_passed(sweep_dir: Path, episodes: int) -> None:
    rows = table(sweep_dir, "episodes", "episode_id, status, reward, termination")
    assert len(rows) == episodes == len({r[0] for r in rows})
    assert {(r[1], r[2], r[3]) for r in rows} == {("completed", 1.0, "user_stop")}
    assert not list(sweep_dir.rglob("*.tmp"))


def test_oracle_sweep_in_process(ray_local, tmp_path):
    job = write_job(tmp_path, agent_deployment={"kind": "scripted", "name": "oracle"})
    result = run_sweep(job, out=tmp_path / "runs")
    assert (result.completed, result.failed, result.skipped) == (16, 0, 0)
    assert_all_passed(result.sweep_dir, 16)
    disclosed = dict(table(result.sweep_dir, "steps", "method, sum(len(disclosed))", "method"))
    assert disclosed["flowstate"] > 0 and disclosed["full_context-json"] == 0  # PSA only where it exists
    assert table(result.sweep_dir, "transcript", "count(*)")[0][0] > 16 * 4
    # Run again: everything is found, nothing runs, nothing is duplicated.
    again = run_sweep(job, out=tmp_path / "runs")
    assert (again.skipped, again.completed) == (16, 0)
    assert_all_passed(result.sweep_dir, 16)


def test_a_rerun_with_nothing_to_do_skips_what_finished_and_still_does_what_did_not(
    ray_local, tmp_path, monkeypatch
):
    """Compaction and tracking are recorded in the manifest once done; a rerun that runs nothing
    does neither again (nor starts Ray), a failed tracking step is done by the next rerun, and
    episodes that change (a retry, a regrade) make both owed again."""
    from pipeline.store import compact as compact_module
    from pipeline.store.manifest import finished_steps, forget_finished
    from pipeline.tracking import mlflow_log as tracking

    job = write_job(tmp_path, agent_deployment={"kind": "scripted", "name": "oracle"})
    def tracking_down(sweep_dir: Path) -> None:
        raise ConnectionError("tracking server down")

    real_log = tracking.log_sweep
    monkeypatch.setattr(tracking, "log_sweep", tracking_down)
    first = run_sweep(job, out=tmp_path / "runs")
    assert first.mlflow_run_id is None and set(finished_steps(first.sweep_dir)) == {"compacted"}

    monkeypatch.setattr(tracking, "log_sweep", real_log)
    monkeypatch.setattr(compact_module, "compact", lambda sweep_dir: pytest.fail("compacted again"))
    second = run_sweep(job, out=tmp_path / "runs")
    assert second.mlflow_run_id is not None and not second.finish_errors
    assert set(finished_steps(first.sweep_dir)) == {"compacted", "tracked"}

    monkeypatch.setattr(tracking, "log_sweep", lambda sweep_dir: pytest.fail("logged again"))
    monkeypatch.setattr("pipeline.run.dispatch.init_ray", lambda address: pytest.fail("started Ray"))
    third = run_sweep(job, out=tmp_path / "runs")
    assert (third.skipped, third.completed) == (16, 0)
    assert (third.mlflow_run_id, third.tracking_uri) == (second.mlflow_run_id, second.tracking_uri)

    forget_finished(first.sweep_dir)  # what a regrade does
    monkeypatch.undo()
    fourth = run_sweep(job, out=tmp_path / "runs")
    assert fourth.mlflow_run_id == second.mlflow_run_id  # the same parent run, logged again
    assert set(finished_steps(first.sweep_dir)) == {"compacted", "tracked"}


def test_oracle_sweep_through_a_real_http_server(ray_local, tmp_path):
    # Episode ids depend on the model's identity (engine and name), not on the server's URL.
    probe = write_job(tmp_path, agent_deployment={"kind": "endpoint", "base_url": "http://127.0.0.1:9/v1",
                                                  "model": "oracle-over-http"})
    episodes = expand(load_job(probe)).by_id
    with StubServer(OracleResponder(episodes), model="oracle-over-http") as stub:
        job = write_job(tmp_path, agent_deployment={"kind": "endpoint", "base_url": stub.url, "model": "oracle-over-http",
                                                    "check_schema_enforcement": False})
        result = run_sweep(job, out=tmp_path / "runs")
        assert len(stub.requests) == table(result.sweep_dir, "steps", "count(*)")[0][0]
        assert {r["user"].split("/")[1] for r in stub.requests} == {"agent"}
    assert result.completed == 16
    assert_all_passed(result.sweep_dir, 16)
    # The stub reports token counts (whitespace words), so every agent call has them.
    assert table(result.sweep_dir, "steps", "count(*) FILTER (WHERE prompt_tokens IS NULL)")[0][0] == 0


def test_a_killed_actor_is_replaced_and_its_episodes_retried(ray_local, tmp_path):
    job = write_job(tmp_path, agent_deployment={"kind": "scripted", "name": "crash-once"}, name="crash", tasks=2,
                    execution={"concurrency": 2, "actors": 1})
    markers = [Path(tempfile.gettempdir()) / f"flowstate-crash-once-{e}" for e in expand(load_job(job)).by_id]
    for marker in markers:
        marker.unlink(missing_ok=True)
    try:
        result = run_sweep(job, out=tmp_path / "runs")
    finally:
        for marker in markers:
            marker.unlink(missing_ok=True)
    assert (result.completed, result.failed) == (8, 0)
    attempts = [r[0] for r in table(result.sweep_dir, "episodes", "attempts")]
    assert all(a >= 2 for a in attempts)
    assert_all_passed(result.sweep_dir, 8)


def test_an_unreachable_endpoint_fails_before_anything_runs(ray_local, tmp_path):
    from pipeline.llm import DeploymentStartError

    job = write_job(tmp_path, agent_deployment={"kind": "endpoint", "base_url": "http://127.0.0.1:9/v1", "model": "m",
                                                "startup_timeout_s": 1})
    with pytest.raises(DeploymentStartError):
        run_sweep(job, out=tmp_path / "runs")


def test_a_server_returning_500s_records_failed_episodes_and_their_faults_and_the_next_run_retries_them(
    ray_local, tmp_path
):
    probe = write_job(tmp_path, agent_deployment={"kind": "endpoint", "base_url": "http://127.0.0.1:9/v1", "model": "m"},
                      tasks=1)  # the job's episodes (the limit enters their ids, the URL does not)
    episodes = expand(load_job(probe)).by_id
    with StubServer(OracleResponder(episodes)) as stub:
        deployment = {"kind": "endpoint", "base_url": stub.url, "model": "m", "check_schema_enforcement": False,
                      "client": {"retry": {"max_attempts": 2, "initial_backoff_s": 0.01}}}
        job = write_job(tmp_path, agent_deployment=deployment, tasks=1,
                        execution={"concurrency": 4, "episode_attempts": 2})
        stub.inject("status", status=500, message="engine dead")  # every call, until cleared
        result = run_sweep(job, out=tmp_path / "runs")
        assert (result.completed, result.failed) == (0, 4)
        rows = table(result.sweep_dir, "episodes", "status, termination, attempts, error")
        assert {(r[0], r[1], r[2]) for r in rows} == {("failed", "infrastructure_error", 2)}
        # the last reason: the client gave up on the 500s
        assert all(r[3].startswith("ModelUnavailableError") and "500 - engine dead" in r[3] for r in rows)
        # Every attempt of every call of every attempt of the episode is a row, kept with the failure.
        faults = table(result.sweep_dir, "faults", "episode_id, list((episode_attempt, attempt, retried) ORDER BY seq), "
                                                   "any_value(kind), any_value(http_status)", "episode_id")
        assert len(faults) == 4 and {f[2:] for f in faults} == {("server_error", 500)}
        assert {tuple(f[1]) for f in faults} == {((1, 1, True), (1, 2, False), (2, 1, True), (2, 2, False))}
        shown = "\n".join(render(load_episode(result.sweep_dir, faults[0][0])))
        assert "FAILED after 2 attempt(s): ModelUnavailableError" in shown and "faults: 4 (4 server_error 500)" in shown

        stub.clear()  # the server is back: the next run runs the failed episodes again
        again = run_sweep(job, out=tmp_path / "runs")
    assert (again.skipped, again.completed, again.failed) == (0, 4, 0)
    assert set(table(again.sweep_dir, "episodes", "status, reward")) == {("completed", 1.0)}
    assert table(again.sweep_dir, "faults", "count(*)") == [(0,)]  # the failures' rows went with them


def test_a_server_returning_garbage_is_the_models_failure_not_the_pipelines(ray_local, tmp_path):
    async def babble(messages, body):
        return "I am not following any protocol at all."

    with StubServer(babble) as stub:
        job = write_job(tmp_path, agent_deployment={"kind": "endpoint", "base_url": stub.url, "model": "m",
                                                    "check_schema_enforcement": False}, tasks=1)
        result = run_sweep(job, out=tmp_path / "runs")
    assert (result.completed, result.failed) == (4, 0)
    rows = table(result.sweep_dir, "episodes", "reward, termination, n_parse_error_steps, n_steps")
    assert {(r[0], r[1]) for r in rows} == {(0.0, "max_steps")}
    assert all(r[2] == r[3] > 0 for r in rows)


def session_processes(session: int) -> list[int]:
    """The processes of a session (a driver started with ``start_new_session`` leads its own)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if int(fields[3]) == session and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


@contextmanager
def driver_in_a_subprocess(tmp_path: Path, *, until_done: int, **popen: Any) -> Iterator[tuple[Path, Path, subprocess.Popen]]:
    """``flowstate run`` of a 16-episode oracle job (over a 200 ms HTTP server) in its own process,
    yielded once ``until_done`` episodes have finished: (job file, sweep dir, driver process)."""
    probe = write_job(tmp_path, agent_deployment={"kind": "endpoint", "base_url": "http://127.0.0.1:9/v1", "model": "m"})
    with StubServer(OracleResponder(expand(load_job(probe)).by_id), delay_s=0.2) as stub:
        job = write_job(tmp_path, agent_deployment={"kind": "endpoint", "base_url": stub.url, "model": "m",
                                                    "check_schema_enforcement": False},
                        execution={"concurrency": 2})
        sweep_dir = tmp_path / "runs" / expand(load_job(job)).sweep_id
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        driver = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "run", str(job), "--out", str(tmp_path / "runs")],
                                  cwd=REPO_ROOT, env=env, **popen)
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and len(list(sweep_dir.glob("episodes/**/*.parquet"))) < until_done:
            time.sleep(0.2)
        yield job, sweep_dir, driver


def test_killing_the_driver_then_running_again_resumes_without_duplicates(ray_local, tmp_path):
    with driver_in_a_subprocess(tmp_path, until_done=3, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as (job, sweep_dir, driver):
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
        # Ray workers of the killed driver may finish an episode in flight before they notice: wait
        # until every process of its session (Ray's included) is gone, so that nothing more can appear.
        deadline = time.monotonic() + 120
        while session_processes(driver.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not session_processes(driver.pid)
        done_before = {r[0] for r in table(sweep_dir, "episodes", "episode_id")}
        assert 3 <= len(done_before) < 16
        compact(sweep_dir)  # compacted in between: what was finished is now in parts
        assert finished_episodes(sweep_dir).done == done_before
        result = run_sweep(job, out=tmp_path / "runs")
    assert result.skipped == len(done_before) and result.completed == 16 - len(done_before)
    assert_all_passed(sweep_dir, 16)
    steps = table(sweep_dir, "steps", "episode_id, request, step")
    assert len(steps) == len(set(steps))  # no step row twice


def test_ctrl_c_stops_cleanly_keeps_what_is_finished_and_resumes(ray_local, tmp_path):
    with driver_in_a_subprocess(tmp_path, until_done=2, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True) as (job, sweep_dir, driver):
        driver.send_signal(signal.SIGINT)
        output, _ = driver.communicate(timeout=120)
        assert driver.returncode == 130, output
        assert "interrupted: finished episodes are kept" in output
        done_before = {r[0] for r in table(sweep_dir, "episodes", "episode_id")}
        assert 2 <= len(done_before) < 16
        assert not list(sweep_dir.rglob("*.tmp"))
        result = run_sweep(job, out=tmp_path / "runs")
    assert result.skipped == len(done_before) and result.completed == 16 - len(done_before)
    assert_all_passed(sweep_dir, 16)


def test_a_second_driver_on_the_same_sweep_is_refused_at_once_and_the_first_finishes(ray_local, tmp_path):
    """A resubmitted cluster job: `flowstate run` twice on one run directory."""
    with driver_in_a_subprocess(tmp_path, until_done=1, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True) as (job, sweep_dir, first):
        second = subprocess.run([sys.executable, "-m", "pipeline.cli", "run", str(job), "--out", str(tmp_path / "runs")],
                                cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, capture_output=True,
                                text=True, timeout=120)
        assert second.returncode == 2 and "Ray instance" not in second.stderr  # refused before Ray or a model starts
        assert f"is held by another driver: run by pid {first.pid} on " in second.stderr
        output, _ = first.communicate(timeout=240)
        assert first.returncode == 0, output
    assert_all_passed(sweep_dir, 16)
    assert not claim_path(sweep_dir).exists()  # released at the end


def test_episodes_that_failed_are_retried_by_the_next_run_and_read_once(ray_local, tmp_path):
    """An infrastructure failure is not a result: the next `flowstate run` runs the episode again,
    also after its failure row was compacted, and readers see only the new row."""
    probe = write_job(tmp_path, agent_deployment={"kind": "endpoint", "base_url": "http://127.0.0.1:9/v1", "model": "m"},
                      tasks=2)
    episodes = expand(load_job(probe)).by_id
    with StubServer(OracleResponder(episodes)) as stub:
        deployment = {"kind": "endpoint", "base_url": stub.url, "model": "m", "check_schema_enforcement": False,
                      "client": {"retry": {"max_attempts": 1, "initial_backoff_s": 0.01}}}
        job = write_job(tmp_path, agent_deployment=deployment, tasks=2, execution={"concurrency": 1, "episode_attempts": 1})
        stub.inject("status", status=500, times=3)  # the first episodes' first calls fail
        first = run_sweep(job, out=tmp_path / "runs")  # ends with compaction: the failures sit in parts
        assert first.failed >= 1 and first.completed + first.failed == 8
        assert list((first.sweep_dir / "episodes").glob("*/part-*.parquet"))
        second = run_sweep(job, out=tmp_path / "runs")
    assert (second.skipped, second.completed, second.failed) == (first.completed, first.failed, 0)
    assert_all_passed(second.sweep_dir, 8)  # every file read: one row per episode, each completed


def test_a_truncated_part_is_left_out_by_readers_then_quarantined_and_its_episodes_run_again(ray_local, tmp_path):
    """A compacted part cut to 2,000 bytes (a disk fault, an interrupted copy)."""
    import warnings

    from pipeline.cli.main import main
    from pipeline.store.files import IncompleteResultsWarning
    from pipeline.store.inventory import read_record
    from pipeline.store.verify import verify_sweep
    from tests.pipeline.conftest import SMALL_ORACLE_JOB

    job = tmp_path / "small.yaml"  # its own name: the session's MLflow store keeps one parent run per sweep
    job.write_text(yaml.safe_dump({**SMALL_ORACLE_JOB, "name": "truncated-part"}))
    first = run_sweep(job, out=tmp_path / "runs")
    part = sorted((first.sweep_dir / "episodes").glob("*/part-*.parquet"))[0]
    held = set(read_record(part).episodes)
    part.write_bytes(part.read_bytes()[:2000])
    with pytest.warns(IncompleteResultsWarning, match="left out"):
        assert main(["query", "pass_rate", "--runs", str(first.sweep_dir), "--format", "json"]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IncompleteResultsWarning)
        second = run_sweep(job, out=tmp_path / "runs")
    assert (second.skipped, second.completed) == (8 - len(held), len(held))
    assert (first.sweep_dir / "quarantine" / part.relative_to(first.sweep_dir)).is_file()
    assert verify_sweep(first.sweep_dir).problems == []
    assert len(table(first.sweep_dir, "steps", "episode_id, request, step")) == len(
        set(table(first.sweep_dir, "steps", "episode_id, request, step")))  # nothing twice
    assert_all_passed(first.sweep_dir, 8)
