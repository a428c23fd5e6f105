"""llama.cpp (SmolLM2-135M, the embedded default) on local Ray: start-up time, prefill and
generation tokens/s, and what a prefix-cache hit saves, through the same client the pipeline uses.

    .venv/bin/python perf/llm_llamacpp_throughput.py [--threads 2] [--prompt-words 700]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import statistics
import time

import ray
from machine import machine

from flowstate.chat import ChatMessage
from pipeline.llm import ChatClient, SamplingParams, make_deployment
from pipeline.llm.deployments import ReplicatedDeployment
from pipeline.llm.kinds.llamacpp import LLAMACPP, LlamaCppSpec

WORDS = "river stone amber quiet ledger orbit velvet harbor signal meadow copper lantern".split()


def long_prompt(seed: int, words: int) -> list[ChatMessage]:
    rng = random.Random(seed)
    body = " ".join(rng.choice(WORDS) for _ in range(words))
    return [ChatMessage(role="system", content=f"Case {seed}. Records follow."),
            ChatMessage(role="user", content=f"{body}\nWhich word is most frequent?")]


async def calls(deployment: ReplicatedDeployment, args: argparse.Namespace) -> None:
    # Prefill alone: one token generated, straight to the replica (the routed policy samples more).
    one_token = ChatClient(deployment.urls[0], deployment.spec.served_model(), profile=LLAMACPP,
                           sampling=SamplingParams(max_tokens=1))
    prefill = [await one_token.complete(long_prompt(seed, args.prompt_words)) for seed in range(3)]
    rate = statistics.median((c.usage.prompt_tokens or 0) / c.latency_s for c in prefill)
    print(f"prefill ({prefill[0].usage.prompt_tokens} new prompt tokens, 1 generated): {rate:.0f} tokens/s")

    follow = long_prompt(2, args.prompt_words) + [ChatMessage(role="assistant", content=prefill[-1].text),
                                                  ChatMessage(role="user", content="And the least frequent?")]
    cached = await one_token.complete(follow)
    reused = re.findall(r"(\d+) prefix-match hit", ray.get(deployment.replicas[0].log_tail.remote()))[-1]
    print(f"follow-up of that conversation: {cached.latency_s:.2f} s for {cached.usage.prompt_tokens} prompt tokens "
          f"(uncached {prefill[-1].latency_s:.2f} s); llama.cpp reused {reused} tokens, "
          f"our estimate {cached.usage.cached_tokens_estimate}")

    story = [ChatMessage(role="user", content="Write a long story about a lighthouse keeper.")]
    generated = [await deployment.policy(f"gen-{i}").complete(story) for i in range(3)]
    rate = statistics.median((c.usage.completion_tokens or 0) / c.latency_s for c in generated)
    print(f"generation ({generated[0].usage.completion_tokens} tokens after a "
          f"{generated[0].usage.prompt_tokens}-token prompt, end to end): {rate:.0f} tokens/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompt-words", type=int, default=700)
    args = parser.parse_args()
    print(machine())
    ray.init(include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": os.getcwd()}})
    spec = LlamaCppSpec(n_threads=args.threads, sampling=SamplingParams(max_tokens=256, temperature=0.0))
    deployment = make_deployment(spec)
    assert isinstance(deployment, ReplicatedDeployment)
    started = time.perf_counter()
    deployment.start()
    try:
        described = deployment.describe()
        print(f"llama-cpp-python {described['engine_version']}, {described['model']}, {args.threads} threads")
        print(f"start-up: {time.perf_counter() - started:.1f} s in all (Ray actor + server), "
              f"server ready after {described['startup_s'][0]:.1f} s")
        asyncio.run(calls(deployment, args))
    finally:
        deployment.stop()
        ray.shutdown()


if __name__ == "__main__":
    main()
