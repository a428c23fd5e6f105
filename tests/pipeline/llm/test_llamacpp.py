"""A real llama.cpp deployment (SmolLM2-135M) on local Ray: two replicas, routing, failover."""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import re
import signal
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
import ray

from flowstate.chat import ChatMessage, Completion, ContextOverflowError, Policy
from pipeline.llm import (
    SamplingParams,
    SchemaNotEnforcedError,
    make_deployment,
    verify_schema_enforcement,
)
from pipeline.llm.closing import aclose_caller
from pipeline.llm.deployments import ReplicatedDeployment
from pipeline.llm.kinds.llamacpp import LlamaCppSpec
from tests.listening import all_loopback, listening_addresses
from tests.pipeline.llm.llamacpp import require_llamacpp

pytestmark = pytest.mark.slow

SPEC = LlamaCppSpec(replicas=2, n_threads=1, num_cpus=1, sampling=SamplingParams(max_tokens=24, seed=0))
QUESTION = ChatMessage(role="user", content="Name three colours.")
# A reply that takes long enough (tens of tokens) for a kill to land while its calls are in flight.
LONG_QUESTION = ChatMessage(role="user", content="Write the numbers from 1 to 40, separated by commas.")


def running(pid: int) -> bool:
    """True while ``pid`` is a live process (a zombie counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def wait_gone(pids: list[int], timeout_s: float = 15.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while any(running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [p for p in pids if running(p)]


def actor_dead(actor: Any, timeout_s: float = 30.0) -> bool:
    """Whether calls to ``actor`` fail within ``timeout_s``: ``ray.kill`` is asynchronous, so a call
    made right after it may still reach the actor, but none made later may."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ray.get(actor.describe.remote(), timeout=5)
        except ray.exceptions.RayActorError:
            return True
        except ray.exceptions.GetTimeoutError:
            pass
        time.sleep(0.2)
    return False


def start(spec: LlamaCppSpec = SPEC) -> ReplicatedDeployment:
    require_llamacpp()
    deployment = make_deployment(spec)
    assert isinstance(deployment, ReplicatedDeployment)
    deployment.start()
    return deployment


@pytest.fixture(scope="module")
def llamacpp(ray_local: None) -> Iterator[ReplicatedDeployment]:
    deployment = start()
    try:
        yield deployment
    finally:
        deployment.stop()


async def converse(policy: Policy, turns: int) -> list[Completion]:
    messages = [QUESTION]
    completions = []
    for turn in range(turns):
        completion = await policy.complete(messages)
        completions.append(completion)
        messages += [ChatMessage(role="assistant", content=completion.text),
                     ChatMessage(role="user", content=f"Now {turn + 2} more, please.")]
    return completions


def test_two_replicas_start_healthy_and_are_described(llamacpp: ReplicatedDeployment) -> None:
    assert len(set(llamacpp.urls)) == 2
    for url in llamacpp.urls:
        models = httpx.get(f"{url}/models", timeout=10).json()
        assert models["data"][0]["id"] == "SmolLM2-135M-Instruct.Q4_1"
    described = llamacpp.describe()
    assert described["engine"] == "llamacpp" and described["replicas"] == 2
    assert described["engine_version"] == importlib.metadata.version("llama-cpp-python")
    assert described["model"] == "SmolLM2-135M-Instruct.Q4_1"
    command = described["command"]
    assert command[command.index("--use_mmap") + 1] == "false" and command[command.index("--n_ctx") + 1] == "8192"
    assert all(0 < s < 60 for s in described["startup_s"])
    # each server listens on 127.0.0.1 only (docs/reliability-security.md, "Secrets and network exposure")
    for replica in ray.get([r.describe.remote() for r in llamacpp.replicas]):
        assert all_loopback(listening_addresses(replica["server_pid"])) and replica["url"].startswith("http://127.0.0.1:")


def test_a_conversation_gets_real_token_counts_and_an_honest_cache_estimate(llamacpp: ReplicatedDeployment) -> None:
    policy = llamacpp.policy("tokens")
    completions = asyncio.run(converse(policy, 3))
    asyncio.run(aclose_caller(policy))
    prompts = [c.usage.prompt_tokens or 0 for c in completions]
    assert prompts[0] > 10 and prompts[0] < prompts[1] < prompts[2]
    assert all((c.usage.completion_tokens or 0) > 0 and c.text for c in completions)
    assert all(c.usage.cached_tokens is None for c in completions)
    assert len({c.served_by for c in completions}) == 1
    # What llama.cpp really reused, from its verbose log, against our estimate.
    replica = llamacpp.replicas[llamacpp.urls.index(str(completions[0].served_by))]
    hits = [int(n) for n in re.findall(r"(\d+) prefix-match hit", ray.get(replica.log_tail.remote()))][-2:]
    estimates = [c.usage.cached_tokens_estimate or 0 for c in completions[1:]]
    print(f"prefix reused by llama.cpp: {hits}, estimated: {estimates}, prompts: {prompts}")
    for hit, estimate in zip(hits, estimates, strict=True):
        assert abs(estimate - hit) <= 0.15 * hit
    # the exact figure from token ids (the GGUF's own tokenizer and template) is what llama.cpp reused,
    # up to the completion's re-tokenisation; the physical limit bounds it from above
    reusable = [c.usage.reusable_prefix_tokens for c in completions]
    print(f"reusable prefix from token ids: {reusable}, physical limits: "
          f"{[c.usage.physical_limit_tokens for c in completions]}")
    assert reusable[0] == 0 and completions[0].usage.physical_limit_tokens == 0
    for hit, completion in zip(hits, completions[1:], strict=True):
        u = completion.usage
        assert u.reusable_prefix_tokens is not None and abs(u.reusable_prefix_tokens - hit) <= 3
        assert u.physical_limit_tokens is not None and u.reusable_prefix_tokens - 3 <= u.physical_limit_tokens
        assert u.physical_limit_tokens <= (u.prompt_tokens or 0)


def test_the_tokenizer_counts_what_the_server_reports(llamacpp: ReplicatedDeployment) -> None:
    """``analysis.count_tokens: smollm2`` counts a prompt exactly as the server does (same vocabulary and
    chat template); a completion to within its end-of-turn token."""
    from pipeline.llm.counting import chat_tokenizer

    tokenizer = chat_tokenizer("smollm2")
    policy = llamacpp.policy("counted")
    messages = [ChatMessage(role="system", content="You count."), QUESTION]
    completion = asyncio.run(policy.complete(messages))
    asyncio.run(aclose_caller(policy))
    assert completion.usage.prompt_tokens == len(tokenizer.prompt_ids(messages))
    assert abs((completion.usage.completion_tokens or 0) - tokenizer.count(completion.text)) <= 1


def test_a_prompt_beyond_the_context_window_is_a_context_overflow(llamacpp: ReplicatedDeployment) -> None:
    policy = llamacpp.policy("overflow")
    with pytest.raises(ContextOverflowError, match="maximum context length is 8192"):
        asyncio.run(policy.complete([ChatMessage(role="user", content="word " * 9000)]))
    asyncio.run(aclose_caller(policy))


class IgnoresSchema:
    """A server that drops the schema silently (vLLM with the removed ``guided_json``)."""

    def __init__(self, inner: Policy) -> None:
        self.inner = inner

    async def complete(
        self, messages: Sequence[ChatMessage], *, json_schema: Mapping[str, Any] | None = None
    ) -> Completion:
        return await self.inner.complete(messages)


def test_json_schema_is_really_enforced(llamacpp: ReplicatedDeployment) -> None:
    policy = llamacpp.policy("schema-check")
    asyncio.run(verify_schema_enforcement(policy))
    with pytest.raises(SchemaNotEnforcedError):
        asyncio.run(verify_schema_enforcement(IgnoresSchema(policy)))
    asyncio.run(aclose_caller(policy))


async def one_round(policies: Sequence[Policy], question: ChatMessage = QUESTION) -> list[str]:
    completions = await asyncio.gather(*(p.complete([question]) for p in policies))
    return [str(c.served_by) for c in completions]


def test_sessions_stick_to_a_replica_and_spread_over_both(llamacpp: ReplicatedDeployment) -> None:
    policies = [llamacpp.policy(f"episode-{i}") for i in range(4)]
    first = asyncio.run(one_round(policies))
    assert Counter(first) == {url: 2 for url in llamacpp.urls}
    assert asyncio.run(one_round(policies)) == first
    for p in policies:
        asyncio.run(aclose_caller(p))


@ray.remote(num_cpus=0)
def served_by_from_a_worker(deployment: ReplicatedDeployment, session: str) -> str:
    return str(asyncio.run(deployment.policy(session).complete([QUESTION])).served_by)


def test_a_deployment_pickles_to_workers_and_sessions_stick_across_processes(
    llamacpp: ReplicatedDeployment,
) -> None:
    here = asyncio.run(one_round([llamacpp.policy("shared-episode")]))
    there = ray.get([served_by_from_a_worker.remote(llamacpp, "shared-episode") for _ in range(2)])
    assert there == here * 2
    asyncio.run(aclose_caller(llamacpp.policy("shared-episode")))


def test_failover_actor_death_and_stop_leave_nothing_behind(ray_local: None) -> None:
    deployment = start(SPEC.model_copy(update={"sampling": SamplingParams(max_tokens=48, seed=0)}))
    try:
        described = ray.get([r.describe.remote() for r in deployment.replicas])
        servers = [d["server_pid"] for d in described]
        policies = [deployment.policy(f"episode-{i}") for i in range(4)]
        first = asyncio.run(one_round(policies))
        victim, survivor = deployment.urls

        async def kill_mid_round() -> list[str]:
            pending = asyncio.ensure_future(one_round(policies, LONG_QUESTION))
            await asyncio.sleep(0.3)
            os.kill(servers[0], signal.SIGKILL)
            return await pending

        after = asyncio.run(kill_mid_round())
        assert victim in first and after == [survivor] * 4
        assert ray.get(deployment.router.snapshot.remote())["dead"] == [victim]
        assert asyncio.run(one_round(policies)) == [survivor] * 4

        # The replica actor dies without cleanup: its supervisor takes the server down.
        ray.kill(deployment.replicas[1])
        assert wait_gone([servers[1]]) == []
    finally:
        deployment.stop()
    assert wait_gone(servers) == []
    assert deployment.replicas == [] and deployment.router is None


def test_stop_terminates_servers_and_actors(ray_local: None) -> None:
    deployment = start(SPEC.model_copy(update={"replicas": 1}))
    try:
        replica = deployment.replicas[0]
        server = ray.get(replica.describe.remote())["server_pid"]
        assert running(server)
    finally:
        deployment.stop()
    assert wait_gone([server]) == []
    assert actor_dead(replica)
