"""Nothing leaks (docs/reliability-security.md, "Secrets and network exposure"), end to end on real local Ray, a real HTTP
server on 127.0.0.1 and MLflow's real sqlite store:

- canary secrets given through the environment (``api_key_env``: the server checks it arrives),
  through ``${VAR}`` (in the tracking URI MLflow connects to) and literally in the job file appear in
  no file of the sweep, the MLflow store (database and artifacts, traces included), Ray's logs or
  the console;
- a canary in one episode's task reaches no other episode's rows, for every registered method, with
  the episodes running concurrently in one actor (test_properties.py checks the sessions alone);
- the stand-in server listens on loopback only (a started deployment's servers: test_llamacpp.py,
  test_wordllama.py);
- a password in the tracking URI (``MLFLOW_TRACKING_URI``, a job's ``tracking_uri: "${VAR}"``)
  reaches no console and no log of any command, whether MLflow's server fails or answers.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
import ray
import yaml
from mlflow import MlflowClient
from rich.console import Console

from flowstate import METHODS, ChatMessage
from pipeline.cli.main import main
from pipeline.config.job import load_job
from pipeline.config.sweep import expand
from pipeline.llm.kinds.replica_sim.server import StubServer
from pipeline.run.dispatch import dispatch
from pipeline.run.launch import run_sweep
from pipeline.run.plan import plan_sweep
from pipeline.run.scripted_policies import UnchangedStatePolicy
from pipeline.store.manifest import read_manifest
from pipeline.testing.oracle_server import OracleResponder
from tests.listening import all_loopback, listening_addresses

pytestmark = pytest.mark.slow

TABLES = ("episodes", "steps", "transcript", "messages", "request_outcomes", "method_records")

CANARY_JOB = """\
name: canary
plugins: [examples.tiny, examples.last_n]
benchmarks:
  - {{benchmark: tiny}}
methods:
  - {{name: flowstate, protocol: json}}
  - {{name: full_context}}
agents:
  - {{deployment: agent}}
deployments:
  agent:
    kind: endpoint
    base_url: {url}
    model: oracle
    api_key_env: FLOWSTATE_CANARY_KEY
    check_schema_enforcement: false
    sampling:
      extra_body:
        metadata: {{tenant: "${{FLOWSTATE_CANARY_TOKEN}}"}}
        api_key: {literal}
execution: {{concurrency: 4, episode_attempts: 1}}
tracking:
  experiment: {experiment}
  tracking_uri: "sqlite:///{store}/mlflow.db?password=${{FLOWSTATE_CANARY_TOKEN}}"
"""


def files_holding(roots: list[Path], canaries: list[str]) -> list[str]:
    """Every file under ``roots`` that holds one of the canaries, with the canary."""
    found = []
    for root in roots:
        for path in (p for p in root.rglob("*") if p.is_file()):
            data = path.read_bytes()
            found += [f"{path}: {c}" for c in canaries if c.encode() in data]
    return found


def ray_logs() -> Path:
    return Path(ray._private.worker._global_node.get_logs_dir_path())  # noqa: SLF001 - the session's own logs


def test_canary_secrets_are_used_and_reach_no_file_mlflow_log_or_console(ray_local, tmp_path, monkeypatch):
    from pipeline.tracking import mlflow_runs

    key, token, literal = (f"{kind}-canary-{secrets.token_hex(12)}" for kind in ("sk", "tok", "lit"))
    monkeypatch.setenv("FLOWSTATE_CANARY_KEY", key)  # set after Ray started: the actors get it with the deployment
    monkeypatch.setenv("FLOWSTATE_CANARY_TOKEN", token)
    store = tmp_path / "mlflow"
    store.mkdir()
    experiment = f"canary-{secrets.token_hex(4)}"
    MlflowClient(f"sqlite:///{store}/mlflow.db").create_experiment(experiment, artifact_location=str(store / "artifacts"))
    job_path = tmp_path / "canary.yaml"

    def write_job(url: str) -> Path:
        job_path.write_text(CANARY_JOB.format(url=url, literal=literal, experiment=experiment, store=store))
        return job_path

    episodes = expand(load_job(write_job("http://127.0.0.1:9/v1"))).by_id  # ids do not depend on the URL
    connected: list[str] = []
    opened = mlflow_runs.open_client
    monkeypatch.setattr(mlflow_runs, "open_client", lambda uri: connected.append(uri) or opened(uri))
    console = io.StringIO()
    with StubServer(OracleResponder(episodes), model="oracle") as stub:
        # a server that echoes the key in its error (as OpenAI's does), once
        stub.inject("status", status=401, message=f"Incorrect API key provided: {key}", times=1)
        result = run_sweep(write_job(stub.url), out=tmp_path / "runs", console=Console(file=console, width=200))

    # the secrets were used: the key as every call's bearer token, the token in the tracking URI
    assert stub.authorizations and set(stub.authorizations) == {f"Bearer {key}"}
    assert connected and set(connected) == {f"sqlite:///{store}/mlflow.db?password={token}"}  # live and at the end
    assert (result.completed, result.failed, result.finish_errors) == (3, 1, [])
    [error] = [r[0] for r in duckdb.sql(f"SELECT error FROM read_parquet('{result.sweep_dir}/episodes/**/*.parquet') "
                                        "WHERE status = 'failed'").fetchall()]
    assert "ModelRequestError" in error and "Incorrect API key provided: ***" in error
    # MLflow logged the sweep at the job's URI (read again from the environment), traces included
    run = MlflowClient(f"sqlite:///{store}/mlflow.db").get_run(result.mlflow_run_id)
    assert run.data.params["deployment.agent.base_url"] == stub.url
    assert result.tracking_uri.endswith("?password=${FLOWSTATE_CANARY_TOKEN}")
    assert re.search(r"MLflow: run \w+ \(2 cells, \d+ metrics, [1-9]\d* traces\)", console.getvalue())
    assert list((store / "artifacts").rglob("canary.yaml")) and list((store / "artifacts").rglob("resolved_job.json"))
    manifest = json.loads((result.sweep_dir / "manifest.json").read_text())  # written redacted
    assert manifest["job"]["tracking"]["tracking_uri"].endswith("?password=${FLOWSTATE_CANARY_TOKEN}")
    assert manifest["job"]["deployments"]["agent"]["sampling"]["extra_body"] == {
        "metadata": {"tenant": "${FLOWSTATE_CANARY_TOKEN}"}, "api_key": "***"}

    canaries = [key, token, literal]
    assert files_holding([tmp_path / "runs", store, ray_logs()], canaries) == []
    assert not [c for c in canaries if c in console.getvalue()]


async def memory_fixture(messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
    """The memory role of every method: the oracle's memory fixture where it knows the call, else an echo."""
    try:
        return (await UnchangedStatePolicy().complete([ChatMessage(**m) for m in messages])).text
    except ValueError:
        return f"echo: {messages[-1]['content']}"


def table_rows(sweep_dir: Path, table: str) -> list[dict[str, Any]]:
    glob = sweep_dir / table / "**" / "*.parquet"
    return duckdb.sql(f"SELECT * FROM read_parquet('{glob}', union_by_name = true)").to_arrow_table().to_pylist()


# Methods whose later requests show what an earlier one held (history, retrieved memory, notes):
# the canary episode's second request must show its code, or the isolation check proves nothing.
CARRIES_MEMORY = {"full_context", "bm25", "zipact_bm25", "reasoningbank", "mem0", "last_n", "recall"}


def test_a_canary_in_one_episodes_task_reaches_no_other_episode_in_any_method(ray_local, tmp_path):
    import examples.last_n  # noqa: F401 - registers its methods, which are checked too
    from examples.tiny import CANARY_TASK, canary_code

    canary_task = f"{CANARY_TASK}{secrets.token_hex(8)}"
    code = canary_code(canary_task)
    methods = [{"name": name} for name in sorted(METHODS.names())]
    methods.append({"name": "zipact", "updater": "separate", "label": "zipact-separate"})
    with StubServer(memory_fixture, model="memory") as stub:
        job = {
            "name": "isolation", "plugins": ["examples.tiny", "examples.last_n"],
            "benchmarks": [{"benchmark": "tiny", "tasks": [canary_task, "t1"]}],
            "methods": methods, "agents": [{"deployment": "oracle"}],
            "memory": {"deployment": "memory", "sampling": {"temperature": 0.0, "max_tokens": 256}},
            "embeddings": {"deployment": "memory"},
            "deployments": {"oracle": {"kind": "scripted", "name": "oracle"},
                            "memory": {"kind": "endpoint", "base_url": stub.url, "model": "memory"}},
            # every episode in flight at once, in one actor's event loop
            "execution": {"concurrency": 2 * len(methods), "actors": 1},
        }
        (tmp_path / "isolation.yaml").write_text(json.dumps(job))
        # planned and dispatched as `flowstate run` does (compaction and MLflow do not run episodes)
        plan = plan_sweep(tmp_path / "isolation.yaml", out=tmp_path / "runs")
        progress, _ = dispatch(plan, address=None, console=Console(file=io.StringIO()))
    assert (progress.completed, progress.failed) == (2 * len(methods), 0)
    assert any(code in json.dumps(r) for r in stub.requests)  # the memory model and embeddings saw it, in its episode

    for table in TABLES:
        rows = table_rows(plan.sweep_dir, table)
        crossed = [(r["method"], r["task_id"]) for r in rows
                   if r["task_id"] != canary_task and code in json.dumps(r, default=str)]
        assert crossed == [], f"{table}: the canary reached other episodes"
    messages = table_rows(plan.sweep_dir, "messages")
    labels = {m.get("label") or m["name"] for m in methods}
    shown = {(r["method"], r["caller"], r["request"]) for r in messages
             if r["task_id"] == canary_task and code in (r["prompt_json"] or "")}
    assert {m for m, _, _ in shown} == labels  # every method's own prompts carry it
    carried = {m for m, caller, k in shown if k == 2 and caller == "agent"}
    assert carried >= CARRIES_MEMORY, f"no memory of request 1 in request 2: {sorted(CARRIES_MEMORY - carried)}"
    assert {r["caller"] for r in messages} >= {"agent", "memory", "embeddings"}


def test_the_stand_in_server_listens_on_loopback_only():
    """The deployments' servers are checked where they are started: test_llamacpp.py, test_wordllama.py
    (vLLM cannot run here; its command line binds the spec's host, test_commands.py)."""
    with StubServer() as stub:
        assert all_loopback({a for a in listening_addresses(os.getpid()) if a[1] == stub.port})


# TEST FIXTURE: MLflow's own tracking server (as `mlflow server` builds it) on 127.0.0.1 over a store
# of the test's, in a process of its own; while the file named third exists, it answers 500 to every
# write of metrics and params.
MLFLOW_SERVER = """
import os, socket, sys
from pathlib import Path
os.environ["_MLFLOW_SERVER_FILE_STORE"], os.environ["_MLFLOW_SERVER_ARTIFACT_ROOT"], failing = sys.argv[1:4]
import uvicorn
from fastapi.responses import JSONResponse
from mlflow.server.fastapi_app import create_fastapi_app

app = create_fastapi_app()

@app.middleware("http")
async def store(request, call_next):
    if Path(failing).exists() and request.url.path.endswith("/runs/log-batch"):
        return JSONResponse({"error_code": "INTERNAL_ERROR", "message": "the store is down"}, status_code=500)
    return await call_next(request)

sock = socket.socket()
sock.bind(("127.0.0.1", 0))
sock.listen()
print(sock.getsockname()[1], flush=True)
uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
"""

ONE_EPISODE_JOB = {
    "benchmarks": [{"benchmark": "taubench", "domain": "airline", "tasks": ["0"], "reward_basis": "classic"}],
    "methods": [{"name": "full_context"}], "agents": [{"deployment": "oracle"}], "user_simulator": "scripted",
    "judge": "none", "deployments": {"oracle": {"kind": "scripted", "name": "oracle"}},
}


@contextlib.contextmanager
def debug_log(path: Path) -> Iterator[None]:
    """Every logger at DEBUG into ``path`` (MLflow's and Ray's have handlers of their own)."""
    handler = logging.FileHandler(path)
    loggers = [logging.getLogger(name) for name in ("", "mlflow", "urllib3", "ray")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.removeHandler(handler)
            logger.setLevel(level)
        handler.close()


def flowstate(*args: str) -> int:
    """``flowstate ARGS`` in this process (``run`` installs its signal handlers: put back after)."""
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        return main(list(args))
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)


def test_a_password_in_the_tracking_uri_reaches_no_console_or_log_whether_the_store_fails_or_not(
        ray_local, tmp_path, monkeypatch, capfd, mlflow_store):
    env_password, var_password = (f"{kind}-canary-{secrets.token_hex(12)}" for kind in ("env", "var"))
    failing = tmp_path / "store-fails"
    failing.touch()
    server = subprocess.Popen([sys.executable, "-c", MLFLOW_SERVER, mlflow_store, str(tmp_path / "artifacts"),
                               str(failing)], stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert server.stdout is not None
        host = f"127.0.0.1:{server.stdout.readline().strip()}"
        monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://alice:{env_password}@{host}/")
        monkeypatch.setenv("FLOWSTATE_CANARY_URI", f"http://bob:{var_password}@{host}/")
        monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")  # a retry, at once: the store stays down
        monkeypatch.setenv("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "0")
        jobs = []
        for name, tracking in (("uri-in-env", {}), ("uri-in-var", {"tracking_uri": "${FLOWSTATE_CANARY_URI}"})):
            jobs.append(tmp_path / f"{name}.yaml")
            jobs[-1].write_text(yaml.safe_dump({**ONE_EPISODE_JOB, "name": f"{name}-{secrets.token_hex(4)}",
                                                "tracking": {**tracking, "live_every_s": 0.1}}))
        sweeps = [expand(load_job(job)) for job in jobs]
        folders = [str(tmp_path / "runs" / sweep.sweep_id) for sweep in sweeps]
        with debug_log(tmp_path / "debug.log"):
            assert [flowstate("run", str(job), "--out", str(tmp_path / "runs")) for job in jobs] == [1, 1]
            assert [flowstate("track", folder) for folder in folders] == [2, 2]
            failing.unlink()  # the store answers again
            assert [flowstate("track", folder) for folder in folders] == [0, 0]
            for command in (["compact", folders[1]], ["report", folders[1]], ["query", "pass_rate", "--runs", folders[1]],
                            ["verify", folders[1]], ["grade", folders[1]],
                            ["show", next(sweeps[1].episodes.ids()), "--runs", folders[1]],
                            ["run", str(jobs[1]), "--out", str(tmp_path / "runs")]):  # the rest, both URIs set
                assert flowstate(*command) == 0, command
        console = capfd.readouterr()
    finally:
        server.kill()
        server.wait()
    shown = console.out + console.err
    assert shown.count("MLflow live tracking failed") == 2 and shown.count("MLflow logging failed") == 4, shown
    assert "alice:***@" in shown and "bob:***@" in shown  # the store named, its password not
    client = MlflowClient(mlflow_store)  # the store behind the server: both sweeps logged in the end
    assert {client.get_run(read_manifest(Path(f))["mlflow_run_id"]).info.status for f in folders} == {"FINISHED"}
    canaries = [env_password, var_password]
    assert [c for c in canaries if c in shown] == []
    assert files_holding([tmp_path, Path(mlflow_store.removeprefix("sqlite:///")).parent, ray_logs()], canaries) == []
