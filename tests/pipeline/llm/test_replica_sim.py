"""The stand-in server's replica mode over real HTTP: prefix-cache hits, LRU eviction, batching
limits, cached tokens in vLLM's shape, the latency model; simulated replicas behind the real router,
sticky and least-loaded (as a deployment), and the routing switch kept out of episode ids."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import ray

from flowstate.chat import ChatMessage, Completion
from pipeline.llm import SCRIPTED_POLICIES, ChatClient, Router, RouterEndpoints, make_deployment
from pipeline.llm.kinds.replica_sim import ReplicaSimSpec, ScriptedOutputs
from pipeline.llm.kinds.replica_sim.engine import ReplicaSettings, sim_token_ids
from pipeline.llm.kinds.replica_sim.server import RawConnection, StubServer
from pipeline.llm.token_ids import TokenizeEndpoint

# Tiny blocks and a clock running 1,000 times faster than real time keep every test short.
FAST = ReplicaSettings(block_tokens=4, cache_tokens=4096, max_model_len=4096, time_scale=0.001)


async def ok(messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
    """A one-token answer, so that a request's KV is its prompt."""
    return "ok"


def words(prefix: str, n: int) -> str:
    """``n`` distinct one-token words (at most four characters each)."""
    return " ".join(f"{prefix}{i}" for i in range(n))


def chat(server: StubServer, content: str, conversation: str = "c") -> dict[str, Any]:
    body = {"model": "m", "messages": [{"role": "user", "content": content}], "user": conversation}
    reply = httpx.post(f"{server.url}/chat/completions", json=body, timeout=30)
    assert reply.status_code == 200, reply.text
    return reply.json()


def cached(server: StubServer, content: str) -> int:
    return chat(server, content)["usage"]["prompt_tokens_details"]["cached_tokens"]


def stats(server: StubServer) -> dict[str, Any]:
    return httpx.get(f"{server.url.removesuffix('/v1')}/sim/stats").json()


@pytest.fixture
def replica() -> Iterator[StubServer]:
    with StubServer(ok, replica=FAST) as server:
        yield server


def test_cached_tokens_are_reported_in_vllms_shape_and_tokenize_agrees(replica: StubServer) -> None:
    content = "alpha beta gammadelta " + words("w", 20)
    first = chat(replica, content)
    usage = first["usage"]
    assert usage["prompt_tokens"] == len(sim_token_ids(content)) == 26  # alph|a beta gamm|adel|ta w0 ...
    assert usage["prompt_tokens_details"] == {"cached_tokens": 0}
    assert usage["completion_tokens"] == 1 and usage["total_tokens"] == 27
    assert chat(replica, content)["usage"]["prompt_tokens_details"] == {"cached_tokens": 24}  # never the last token
    tokens = httpx.post(f"{replica.url.removesuffix('/v1')}/tokenize",
                        json={"model": "m", "messages": [{"role": "user", "content": content}]}).json()
    assert tokens["tokens"] == sim_token_ids(content) and tokens["max_model_len"] == 4096
    assert httpx.get(f"{replica.url}/models").status_code == 200


def test_a_hit_is_the_longest_cached_run_of_whole_blocks(replica: StubServer) -> None:
    base = words("a", 40)
    assert cached(replica, base) == 0
    assert cached(replica, words("a", 22) + " " + words("z", 18)) == 20  # 22 shared tokens: five whole blocks
    assert cached(replica, words("q", 40)) == 0
    assert cached(replica, base + " " + words("b", 3)) == 40  # the first prompt, whole, and more
    assert cached(replica, words("a", 3) + " " + words("x", 30)) == 0  # no whole block shared


def test_the_answer_is_cached_too_and_the_conversation_goes_on_from_it() -> None:
    async def longer(messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
        return words("r", 9)

    with StubServer(longer, replica=FAST) as server:
        prompt = words("p", 10)
        chat(server, prompt)
        # The next prompt carries the previous prompt and answer: 10 + 9 tokens, of which the last
        # sampled one was never in the KV; whole blocks: 16.
        follow_up = {"model": "m", "user": "c", "messages": [{"role": "user", "content": prompt},
                                                              {"role": "assistant", "content": words("r", 9)},
                                                              {"role": "user", "content": words("n", 5)}]}
        usage = httpx.post(f"{server.url}/chat/completions", json=follow_up).json()["usage"]
        assert usage["prompt_tokens"] == 24 and usage["prompt_tokens_details"]["cached_tokens"] == 16


def test_the_least_recently_used_blocks_are_evicted_first() -> None:
    # Room for three prompts of 16 tokens (4 blocks each: the one-token answer adds no KV).
    settings = ReplicaSettings(block_tokens=4, cache_tokens=48, max_model_len=48, time_scale=0.001)
    with StubServer(ok, replica=settings) as server:
        a, b, c, d = (words(x, 16) for x in "abcd")
        assert [cached(server, p) for p in (a, b, c)] == [0, 0, 0]
        assert cached(server, a) == 12  # touches a: b is now the least recently used
        assert stats(server)["evictions"] == 1  # a's new last block took the oldest free one
        assert cached(server, d) == 0  # needs four blocks: b goes
        assert stats(server)["evictions"] == 5
        assert cached(server, a) == 12
        assert cached(server, b) == 0


def test_a_request_longer_than_the_context_is_refused_as_vllm_refuses_it(replica: StubServer) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": words("t", 4096)}]}
    reply = httpx.post(f"{replica.url}/chat/completions", json=body)
    assert reply.status_code == 400 and "maximum context length is 4096 tokens" in reply.json()["error"]["message"]
    with pytest.raises(ValueError, match="must hold one request"):
        ReplicaSettings(cache_tokens=1000, max_model_len=2000)


def overlapping(requests: list[dict[str, Any]]) -> int:
    """The most requests in progress at one instant (from their first step to their last)."""
    events = sorted([(r["started"], 1) for r in requests] + [(r["finished"], -1) for r in requests],
                    key=lambda e: (e[0], e[1]))
    level = most = 0
    for _, step in events:
        level += step
        most = max(most, level)
    return most


async def at_once(url: str, contents: list[str]) -> list[dict[str, Any]]:
    connections = [await RawConnection.open(url) for _ in contents]
    replies = await asyncio.gather(*(c.post("/v1/chat/completions", {"model": "m", "messages": [
        {"role": "user", "content": content}]}) for c, content in zip(connections, contents, strict=True)))
    await asyncio.gather(*(c.close() for c in connections))
    assert all(status == 200 for status, _ in replies)
    return [json.loads(body) for _, body in replies]


@pytest.mark.parametrize("limit", ["max_batch", "cache_tokens"])
def test_no_more_sequences_run_at_once_than_the_batch_or_the_kv_cache_holds(limit: str) -> None:
    # Each request: 8 prompt tokens, an answer of 20 (28 tokens of KV, 7 blocks), 20 steps of 10 ms.
    async def twenty(messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
        return words("o", 20)

    room = {"max_batch": {"max_batch": 2}, "cache_tokens": {"cache_tokens": 2 * 28 + 3, "max_model_len": 28}}[limit]
    settings = ReplicaSettings(block_tokens=4, decode_s_per_token=0.01, prefill_s_per_token=0.0,
                               context_s_per_token=0.0, time_scale=1.0, **room)
    with StubServer(twenty, replica=settings) as server:
        asyncio.run(at_once(server.url, [words(f"p{i}", 8) for i in range(6)]))
        requests = stats(server)["requests"]
    assert len(requests) == 6
    assert overlapping(requests) == 2
    assert sum(r["started"] > r["arrived"] + 0.05 for r in requests) >= 3  # queued behind a full batch


def test_a_call_takes_the_latency_models_time() -> None:
    s = ReplicaSettings(block_tokens=4, cache_tokens=4096, max_model_len=4096, max_batched_tokens=16,
                        prefill_s_per_token=0.001, decode_s_per_token=0.02, context_s_per_token=0.0001, time_scale=0.05)

    async def three(messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
        return "x y z"

    with StubServer(three, replica=s) as server:
        chat(server, words("p", 40))
        (request,) = stats(server)["requests"]
    # 40 prompt tokens in chunks of 16: three steps, the last sampling the first token; then two
    # decode steps, each reading the KV of the prompt and the tokens so far.
    prefill = 3 * s.decode_s_per_token + 40 * s.prefill_s_per_token
    decode = sum(s.decode_s_per_token + s.context_s_per_token * (40 + i) for i in (1, 2))
    assert request["finished"] - request["started"] == pytest.approx(prefill + decode)


def test_sequences_in_one_batch_share_its_decode_steps() -> None:
    settings = ReplicaSettings(block_tokens=4, decode_s_per_token=0.05, prefill_s_per_token=0.0,
                               context_s_per_token=0.0, time_scale=1.0)

    async def ten(messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
        return words("o", 10)

    with StubServer(ten, replica=settings) as server:
        asyncio.run(at_once(server.url, [words(f"p{i}", 8) for i in range(8)]))
        summary = stats(server)
    busy = sum(end - start for start, end in summary["busy"])
    # Alone, eight requests of ten steps would take 80 steps; batched, about ten (a late arrival
    # joins a step or two later).
    assert summary["steps"] < 20 and busy < 20 * 0.05
    assert summary["batch_seconds"] / busy > 4


# -- behind the router ------------------------------------------------------------------------
async def conversation(policy: ChatClient, calls: int) -> list[Completion]:
    """One conversation of ``calls`` calls, each carrying the previous ones (as an agent's does)."""
    messages: list[ChatMessage] = []
    completions = []
    for i in range(calls):
        messages.append(ChatMessage(role="user", content=words(chr(ord("a") + i), 30)))
        completion = await policy.complete(messages)
        messages.append(ChatMessage(role="assistant", content=completion.text))
        completions.append(completion)
    await policy.aclose()
    return completions


@pytest.mark.slow
def test_a_sticky_conversation_finds_its_prefix_on_its_replica(ray_local: None) -> None:
    with StubServer(replica=FAST) as a, StubServer(replica=FAST) as b:
        router = Router.remote("/v1/models", a.url, b.url, seed=0)
        try:
            policy = ChatClient(RouterEndpoints(router, "episode-1/agent"), "m", tokens=TokenizeEndpoint("m"))
            completions = asyncio.run(conversation(policy, 8))
        finally:
            ray.kill(router)
    assert len({c.served_by for c in completions}) == 1
    follow_ups = completions[1:]
    # Each follow-up reuses the previous call's prompt and answer but for the answer's last token
    # (never in the KV): whole blocks of it; the physical limit is the prompt less the new message.
    assert all(c.usage.cached_tokens == (c.usage.reusable_prefix_tokens - 1) // 4 * 4 > 0 for c in follow_ups)
    assert all(c.usage.physical_limit_tokens == c.usage.prompt_tokens - 30 for c in follow_ups)


class Steps:
    """TEST FIXTURE: a scripted agent that counts its calls (its state lives with the conversation)."""

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, messages: Any, *, json_schema: Any = None) -> Completion:
        self.calls += 1
        return Completion(text=f"step {self.calls}")


@pytest.mark.slow
def test_simulated_replicas_as_a_deployment_with_least_loaded_routing(ray_local: None, tmp_path: Path) -> None:
    SCRIPTED_POLICIES.register("test-steps", lambda session_id, role, context: Steps())
    spec = ReplicaSimSpec(replicas=2, routing="least_loaded", script="test-steps", stats_dir=tmp_path, replica=FAST,
                          startup_timeout_s=60)
    with make_deployment(spec) as deployment:
        assert isinstance(deployment.policy("episode-1", "judge"), ChatClient)  # only the agent follows the script
        policy = deployment.policy("episode-1")
        assert isinstance(policy, ScriptedOutputs) and isinstance(policy.client.tokens, TokenizeEndpoint)
        completions = asyncio.run(conversation(policy, 8))
    # Its own replica counts the conversation, so the other one is less loaded: it alternates, and
    # the script, which lives with the conversation, goes on wherever the call lands.
    assert [c.served_by for c in completions] == [c.served_by for c in completions[:2]] * 4
    assert [c.text for c in completions] == [f"step {i}" for i in range(1, 9)]
    follow_ups = completions[1:]
    assert follow_ups[0].usage.cached_tokens == 0
    assert all(c.usage.reusable_prefix_tokens == 0 for c in follow_ups)
    # Back on a replica, the conversation finds what it left there two calls before.
    assert all(c.usage.cached_tokens == (before.usage.prompt_tokens + before.usage.completion_tokens - 1) // 4 * 4
               for before, c in zip(completions, completions[2:], strict=False))
    assert all(c.usage.physical_limit_tokens == c.usage.prompt_tokens - 30 for c in follow_ups)
    figures = [json.loads(p.read_text()) for p in tmp_path.glob("replica-*.json")]  # written as they stopped
    assert len(figures) == 2 and sum(len(f["requests"]) for f in figures) == 8


def test_the_routing_switch_enters_no_episode_id() -> None:
    from pipeline.config.job import parse_job
    from pipeline.config.sweep import expand

    def job(routing: str) -> dict[str, Any]:
        return {"name": "routing", "plugins": ["pipeline.llm.kinds.replica_sim"],
                "benchmarks": [{"benchmark": "taubench", "domain": "airline", "limit": 2}],
                "methods": [{"name": "flowstate"}], "agents": [{"deployment": "sim"}],
                "user_simulator": "scripted", "judge": "none",
                "deployments": {"sim": {"kind": "replica_sim", "replicas": 4, "routing": routing}}}

    sticky, least = (expand(parse_job(job(r))) for r in ("sticky", "least_loaded"))
    assert [e.episode_id for e in sticky.episodes] == [e.episode_id for e in least.episodes]
    assert "routing" not in sticky.job.to_resolved()["deployments"]["sim"]  # the default is not even written
