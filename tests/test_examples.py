"""The worked example of each kind of plug-in (examples/: a benchmark, two methods, a deployment kind)
runs as a user runs it: ``flowstate run examples/job.yaml`` in a process of its own, with the
example modules found on PYTHONPATH, through real Ray, the command_server replicas it starts (the
project's stand-in OpenAI-compatible server, as separate processes), Parquet and SQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from examples.command_server import CommandServerSpec, server_command
from tests.conftest import REPO_ROOT


def test_a_command_servers_placeholders_are_filled_in_and_its_identity_is_its_command() -> None:
    spec = CommandServerSpec(model="m", command=["{python}", "-m", "server", "--bind", "{host}:{port}", "--model", "m"])
    assert server_command(spec, "127.0.0.1", 8123, "/usr/bin/python3") == [
        "/usr/bin/python3", "-m", "server", "--bind", "127.0.0.1:8123", "--model", "m"]
    assert spec.identity() == {"kind": "command_server", "model": "m", "command": spec.command}
    assert spec.model_copy(update={"num_cpus": 4.0}).identity() == spec.identity()  # where it runs is no result


@pytest.mark.slow
def test_the_worked_example_runs_end_to_end(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    run = subprocess.run([sys.executable, "-m", "pipeline.cli", "run", "examples/job.yaml", "--out", str(tmp_path / "runs")],
                         cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    [sweep] = [d for d in (tmp_path / "runs").iterdir() if d.is_dir()]

    def rows(table: str, sql: str) -> list[tuple]:
        files = str(sweep / table / "**" / "*.parquet")
        return duckdb.sql(sql.replace("{T}", f"read_parquet('{files}', union_by_name = true)")).fetchall()

    # the example benchmark's oracle solves every task in both example methods
    assert rows("episodes", "SELECT method, task_id, status, reward FROM {T} ORDER BY method, task_id") == [
        (m, t, "completed", 1.0) for m in ("last_n", "recall") for t in ("t1", "t2")]
    # recall's own model and embeddings were served by the two command_server deployments
    served = rows("messages", "SELECT caller, count(*), bool_and(served_by LIKE 'http://127.0.0.1:%/v1') FROM {T} "
                              "WHERE method = 'recall' AND caller != 'agent' GROUP BY ALL ORDER BY caller")
    # a note per request (5), embedded, and each later request's query (3); embeddings name no replica
    assert served == [("embeddings", 8, None), ("memory", 5, True)]
    manifest = json.loads((sweep / "manifest.json").read_text())
    assert {name: d["kind"] for name, d in manifest["deployments"].items()} == {
        "oracle": "scripted", "notes": "command_server", "vectors": "command_server"}
    # and its replicas were stopped with the sweep: no stand-in server of this run is left
    left = subprocess.run(["pgrep", "-f", "pipeline.llm.kinds.replica_sim.server --host"], capture_output=True, text=True)
    assert left.stdout == ""
