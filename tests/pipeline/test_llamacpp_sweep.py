"""The embedded default end to end: SmolLM2-135M on llama.cpp servers in Ray actors, a real sweep.

Slow by nature (a real model on 2 cores); each test keeps episodes short with step limits.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import duckdb
import pytest
import yaml

from pipeline.run.launch import run_sweep
from tests.pipeline.llm.llamacpp import require_llamacpp

pytestmark = pytest.mark.slow

AGENT_CTX = 8192
USER_CTX = 4096  # different from the agent's, so a test can tell the two servers apart


def write_job(tmp_path: Path, *, methods: list[dict], agent_replicas: int = 1, max_env_steps: int = 8) -> Path:
    job = {
        "name": "llamacpp-e2e",
        "benchmarks": [{"benchmark": "taubench", "domain": "airline", "tasks": ["3"], "reward_basis": "classic",
                        "tool_rendering": "compact", "max_env_steps": max_env_steps}],
        "methods": methods,
        "agents": [{"deployment": "agent", "label": "smollm2", "sampling": {"max_tokens": 96}}],
        "user_simulator": {"deployment": "user", "sampling": {"temperature": 0.0, "max_tokens": 32}},
        "judge": "none",
        "deployments": {
            "agent": {"kind": "llamacpp", "n_ctx": AGENT_CTX, "n_threads": 1, "num_cpus": 0.5,
                      "replicas": agent_replicas, "client": {"timeout_s": 600}},
            "user": {"kind": "llamacpp", "n_ctx": USER_CTX, "n_threads": 1, "num_cpus": 0.5, "client": {"timeout_s": 600}},
        },
        "limits": {"max_steps_per_request": 2},
        "execution": {"concurrency": 1},
    }
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def rows(sweep_dir: Path, table: str, select: str, where: str = "TRUE") -> list[tuple]:
    glob = str(sweep_dir / table / "**" / "*.parquet")
    return duckdb.sql(f"SELECT {select} FROM read_parquet('{glob}', union_by_name = true, hive_partitioning = false) "
                      f"WHERE {where}").fetchall()


def test_flowstate_and_full_context_episodes_with_real_token_counts(ray_local, tmp_path):
    require_llamacpp()
    job = write_job(tmp_path, methods=[{"name": "flowstate", "protocol": "json"}, {"name": "full_context", "protocol": "json"}])
    result = run_sweep(job, out=tmp_path / "runs")
    assert (result.completed + result.grading_failed, result.failed) == (2, 0)
    episodes = rows(result.sweep_dir, "episodes", "method, status, termination, agent_prompt_tokens, agent_cached_tokens")
    assert {e[0] for e in episodes} == {"flowstate-json", "full_context-json"}
    assert all(e[3] > 1000 for e in episodes)  # the system prompt alone is thousands of real tokens
    assert all(e[4] is None for e in episodes)  # llama.cpp reports no cached tokens: null, never 0
    calls = rows(result.sweep_dir, "messages",
                 "caller, prompt_tokens, completion_tokens, cached_tokens, cached_tokens_estimate, served_by")
    assert {c[0] for c in calls} == {"agent", "user_simulator"}
    assert all(c[1] > 0 and c[2] > 0 and c[3] is None and c[5].startswith("http://127.0.0.1:") for c in calls)
    agent = [c for c in calls if c[0] == "agent"]
    assert max(c[4] for c in agent) > 500  # later calls share the system prompt with the previous one
    # messages are in call order: the user simulator opens each request, the agent's calls follow
    ordered = sorted(rows(result.sweep_dir, "messages", "episode_id, seq, caller, request"))
    for episode in {r[0] for r in ordered}:
        user_messages = 0
        for _, _, caller, request in (r for r in ordered if r[0] == episode):
            user_messages += caller == "user_simulator"
            assert caller == "user_simulator" or request == user_messages
    # The server's grammar enforces the JSON protocol: an output fails to parse only when the
    # completion limit cut it off mid-object.
    broken = rows(result.sweep_dir, "steps", "finish_reason",
                  "array_to_string(parse_errors, '|') LIKE '%invalid JSON%'")
    assert all(reason == "length" for (reason,) in broken)


def _llama_servers(n_ctx: int) -> dict[int, str]:
    """pid -> port of the running llama.cpp servers started with this context size."""
    servers = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = [a.decode() for a in (entry / "cmdline").read_bytes().split(b"\0")]
        except OSError:
            continue
        if "llama_cpp.server" in argv and str(n_ctx) in argv and "--port" in argv:
            servers[int(entry.name)] = argv[argv.index("--port") + 1]
    return servers


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _deployed(runs: Path) -> bool:
    """The sweep's servers are up (the manifest records them once they answer)."""
    return any(json.loads(m.read_text()).get("deployments") for m in runs.glob("*/manifest.json"))


def _kill_the_busy_agent_server(runs: Path, stop: threading.Event, killed: list[str]) -> None:
    """Once an agent server is visibly working on a request, SIGKILL it (once); records its port."""
    while not stop.is_set() and not _deployed(runs):
        time.sleep(0.5)
    while not stop.is_set() and not killed:
        for pid, port in _llama_servers(AGENT_CTX).items():
            try:
                before = _cpu_ticks(pid)
                time.sleep(1.0)
                if _cpu_ticks(pid) - before > 50:  # more than half a second of CPU in one second
                    os.kill(pid, signal.SIGKILL)
                    killed.append(port)
                    return
            except OSError:
                continue
        time.sleep(0.5)


def test_the_memory_and_state_tracking_families_run_on_a_real_model(ray_local, tmp_path):
    """BM25 and ZipAct on the real model, one capped episode each: every request's retrieval and
    store recorded with the B.3 Memory System prompt; every ZipAct step's state update recorded (kept
    or not) with the State Tracking prompt and its execution_state block enforced by the server."""
    require_llamacpp()
    job = write_job(tmp_path, methods=[{"name": "bm25", "protocol": "json"}, {"name": "zipact", "protocol": "json"}])
    result = run_sweep(job, out=tmp_path / "runs")
    assert (result.completed + result.grading_failed, result.failed) == (2, 0)
    requests = dict(rows(result.sweep_dir, "episodes", "method, n_requests"))
    steps = dict(rows(result.sweep_dir, "episodes", "method, n_steps"))
    kinds = dict(rows(result.sweep_dir, "method_records", "method || '/' || kind, count(*)", "TRUE GROUP BY ALL"))
    bm25 = requests["bm25-json"]
    assert kinds["bm25-json/retrieval"] == bm25 >= 1 and kinds.get("bm25-json/write", 0) in (bm25 - 1, bm25)
    assert kinds["zipact-json/state_update"] == steps["zipact-json"] >= 1
    prompts = dict(rows(result.sweep_dir, "messages", "method, string_agg(prompt_json, '')", "caller = 'agent' GROUP BY ALL"))
    assert "<memory>" in prompts["bm25-json"] and "<trajectory_history>" in prompts["bm25-json"]
    assert "<agent_status>" in prompts["zipact-json"] and "goal_state" in prompts["zipact-json"]


def test_a_server_killed_mid_episode_is_routed_around(ray_local, tmp_path):
    require_llamacpp()
    job = write_job(tmp_path, methods=[{"name": "flowstate", "protocol": "json"}], agent_replicas=2, max_env_steps=10)
    stop, killed = threading.Event(), []
    watcher = threading.Thread(target=_kill_the_busy_agent_server, args=(tmp_path / "runs", stop, killed), daemon=True)
    watcher.start()
    try:
        result = run_sweep(job, out=tmp_path / "runs")
    finally:
        stop.set()
        watcher.join(timeout=10)
    assert killed, "no agent server was seen working"
    assert (result.completed + result.grading_failed, result.failed) == (1, 0)
    agent_calls = rows(result.sweep_dir, "messages", "served_by", "caller = 'agent' ORDER BY seq")
    assert agent_calls, "the episode made no agent call"
    assert not agent_calls[-1][0].startswith(f"http://127.0.0.1:{killed[0]}/")  # it finished on the survivor
