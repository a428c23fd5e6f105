"""Faults on the model path are rows, not crashes: oracle sweeps on a real local Ray through a stand-in
server on 127.0.0.1 that fails calls at set rates."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml
from mlflow import MlflowClient

from pipeline.analysis.query import connect, run_query
from pipeline.cli.show import load_episode, render
from pipeline.config.job import load_job
from pipeline.config.sweep import expand
from pipeline.llm.kinds.replica_sim.server import Fault, FaultRate, FaultRates, StubServer
from pipeline.run.launch import run_sweep
from pipeline.store.files import table_files
from pipeline.store.verify import verify_sweep
from pipeline.testing.oracle_server import OracleResponder
from tests.pipeline.conftest import SMALL_ORACLE_JOB

pytestmark = pytest.mark.slow

MODEL = "oracle-over-http"
# Every fault a transport can have, each on about 4 % of the calls (a hang on 1 %: each costs the
# client's 2 s timeout), and a completion run on to max_tokens on 3 %. A 429 asks for 0.3 s, more
# than any backoff of the job's client.
FAULTS = FaultRates(seed=11, rates=[
    FaultRate(fault=Fault(kind="status", status=500), rate=0.04),
    FaultRate(fault=Fault(kind="status", status=503, message="overloaded"), rate=0.04),
    FaultRate(fault=Fault(kind="status", status=429, message="rate limited", retry_after=0.3), rate=0.04),
    FaultRate(fault=Fault(kind="hang"), rate=0.01),
    FaultRate(fault=Fault(kind="drop"), rate=0.04),
    FaultRate(fault=Fault(kind="truncated"), rate=0.04),
    FaultRate(fault=Fault(kind="garbage"), rate=0.04),
    FaultRate(fault=Fault(kind="no_choices"), rate=0.04),
    FaultRate(fault=Fault(kind="length"), rate=0.03),
])
# The server's fault -> what the client records.
CLIENT_KIND = {"hang": "timeout", "drop": "connection", "truncated": "invalid_json", "garbage": "invalid_json",
               "no_choices": "no_choices"}


def client_kind(fault: Fault) -> tuple[str, int | None]:
    if fault.kind == "status":
        return ("rate_limited" if fault.status == 429 else "server_error"), fault.status
    if fault.kind == "length":
        return "length", 200  # an answer, cut
    return CLIENT_KIND[fault.kind], None


def oracle_job(folder: Path, url: str) -> Path:
    """The session's small oracle job (8 episodes) with its agent behind ``url`` (the same episode
    ids whatever the URL)."""
    client = {"timeout_s": 2.0, "retry": {"max_attempts": 8, "initial_backoff_s": 0.01, "max_backoff_s": 0.5}}
    job = {**SMALL_ORACLE_JOB, "name": "faulty-oracle",
           "deployments": {"oracle": {"kind": "endpoint", "base_url": url, "model": MODEL,
                                      "check_schema_enforcement": False, "client": client}}}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "faulty-oracle.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def rows(sweep_dir: Path, table: str, sql: str) -> list[tuple[Any, ...]]:
    """``sql`` over the table's visible files, as ``{T}``."""
    files = [str(f) for f in table_files(sweep_dir)[table]]
    if not files:
        return []
    with duckdb.connect() as con:
        return con.execute(sql.format(T="read_parquet($files, union_by_name = true)"), {"files": files}).fetchall()


EPISODE = "benchmark, domain, method, task_id, trial"  # the same episode, whichever model identity ran it


def outcomes(sweep_dir: Path) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """Per episode: status, termination, reward, grade detail, metrics, and its whole transcript."""
    graded = {r[:5]: r[5:] for r in rows(sweep_dir, "episodes", f"SELECT {EPISODE}, status, termination, reward, "
                                                                "grading_json, metrics FROM {T}")}
    said = rows(sweep_dir, "transcript", f"SELECT {EPISODE}, list((role, content, tool_calls_json) ORDER BY seq) "
                                         f"FROM {{T}} GROUP BY {EPISODE}")
    return {r[:5]: (*graded[r[:5]], r[5]) for r in said}


def test_faults_at_rates_change_no_grade_and_each_is_one_row(oracle_sweep: Path, tmp_path: Path) -> None:
    episodes = expand(load_job(oracle_job(tmp_path / "probe", "http://127.0.0.1:9/v1"))).by_id
    with StubServer(OracleResponder(episodes), model=MODEL, faults=FAULTS) as faulty:
        result = run_sweep(oracle_job(tmp_path, faulty.url), out=tmp_path / "runs")
        received = list(faulty.received)
    assert (result.completed, result.failed) == (8, 0)

    # Each fault the server injected is one row, with what the client saw and where in the episode:
    # every transport fault retried, no cut completion.
    injected = [r for r in received if r.fault is not None]
    recorded = rows(result.sweep_dir, "faults", "SELECT kind, http_status, caller, deployment, request, step, retried, "
                                                "episode_attempt, served_by, episode_id, seq FROM {T}")
    assert len(injected) >= 10 and len({client_kind(r.fault)[0] for r in injected}) >= 6
    assert Counter((kind, status) for kind, status, *_ in recorded) == Counter(client_kind(r.fault) for r in injected)
    assert {(r[2], r[3], r[6] == (r[0] != "length"), r[7], r[8]) for r in recorded} == {
        ("agent", "oracle", True, 1, faulty.url)}
    assert all(r[4] >= 1 and r[5] >= 1 for r in recorded)  # agent calls: inside a step
    by_episode = Counter(r[9] for r in recorded)
    assert all(sorted(r[10] for r in recorded if r[9] == e) == list(range(n)) for e, n in by_episode.items())

    # No fault of the path changed a grade: the same rewards, grading details and transcripts as the
    # fault-free run of the same episodes (the session's oracle sweep, its oracle in process). A
    # completion cut at max_tokens is the model's answer, which may change the episode: it still
    # finished and was graded.
    expected, got = outcomes(oracle_sweep), outcomes(result.sweep_dir)
    assert len(expected) == 8 and {o[:3] for o in expected.values()} == {("completed", "user_stop", 1.0)}
    key = {r[0]: r[1:] for r in rows(result.sweep_dir, "episodes", f"SELECT episode_id, {EPISODE} FROM {{T}}")}
    cut = {key[r[9]] for r in recorded if r[0] == "length"}
    assert 0 < len(cut) < 8
    assert {k: o for k, o in got.items() if k not in cut} == {k: o for k, o in expected.items() if k not in cut}
    assert all(got[k][0] == "completed" and got[k][2] is not None for k in cut)

    # Retries followed Retry-After: the next call of a conversation answered with 429 came 0.3 s later at the earliest.
    later = {(r.conversation, r.n): r.at for r in received}
    waits = [later[(r.conversation, r.n + 1)] - r.at for r in injected if r.fault.status == 429 and r.fault.kind == "status"]
    assert waits and min(waits) >= 0.3

    # The query, flowstate show, MLflow and verify count them too.
    by_kind = Counter()
    for row in run_query("faults", result.sweep_dir).to_pylist():
        assert row["retried"] == (0 if row["kind"] == "length" else row["faults"])
        assert row["raised"] == 0 and row["failed_episodes"] == 0
        by_kind[row["kind"]] += row["faults"]
    assert by_kind == Counter(kind for kind, *_ in recorded)
    shown = "\n".join(render(load_episode(result.sweep_dir, by_episode.most_common(1)[0][0])))
    assert f"faults: {by_episode.most_common(1)[0][1]} (" in shown and "retried" in shown
    client = MlflowClient(result.tracking_uri)
    parent = client.get_run(result.mlflow_run_id)
    children = client.search_runs([parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    assert sum(run.data.metrics.get("faults.total", 0) for run in children) == len(recorded)
    assert (result.sweep_dir / "faults").is_dir() and not verify_sweep(result.sweep_dir).problems


def test_a_sweep_without_a_faults_table_has_no_faults(oracle_sweep: Path) -> None:
    """As a sweep written before the table existed: a fault-free run writes no faults folder."""
    assert not (oracle_sweep / "faults").exists()
    assert run_query("faults", oracle_sweep).num_rows == 0
    with connect(oracle_sweep) as con:
        assert con.execute("SELECT count(*), count(kind) FROM faults").fetchall() == [(0, 0)]
    (episode,) = rows(oracle_sweep, "episodes", "SELECT episode_id FROM {T} LIMIT 1")
    shown = "\n".join(render(load_episode(oracle_sweep, episode[0])))
    assert "status completed" in shown and "faults:" not in shown
