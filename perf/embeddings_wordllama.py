"""WordLlama embeddings on this machine: texts per second at batch 1 and 32, in process and
through the project's /v1/embeddings server over loopback HTTP (what episodes pay).

Usage: ``python perf/embeddings_wordllama.py [--seconds S]``. Texts are ~60-word
trajectory-like sentences; figures are medians over repeated timed rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import machine  # noqa: E402

from pipeline.llm import EmbeddingClient  # noqa: E402
from pipeline.llm.deployments.replica import free_port  # noqa: E402
from pipeline.llm.health import wait_until_ready  # noqa: E402
from pipeline.llm.kinds.wordllama import WordLlamaSpec, server_command  # noqa: E402
from pipeline.llm.kinds.wordllama.model import TextEmbedder  # noqa: E402

WORDS = ("flight reservation passenger seat baggage refund cabin economy business date airport order item "
         "exchange return address payment gift card user asked agent confirmed tool result").split()


def texts(n: int, rng: random.Random) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(60)) for _ in range(n)]


def rate(run, batch: int, seconds: float) -> float:
    """Median texts per second over rounds of ~0.2 s."""
    rates = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        start, done = time.perf_counter(), 0
        while time.perf_counter() - start < 0.2:
            run(batch)
            done += batch
        rates.append(done / (time.perf_counter() - start))
    return statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    print(machine())
    rng = random.Random(3)
    start = time.perf_counter()
    embedder = TextEmbedder()
    print(f"model load (files checked): {(time.perf_counter() - start) * 1000:.0f} ms")
    pool = {b: texts(b, rng) for b in (1, 32)}
    for batch in (1, 32):
        print(f"in process, batch {batch:2d}: {rate(lambda b: embedder.embed(pool[b]), batch, args.seconds):8.0f} texts/s")

    spec = WordLlamaSpec()
    port = free_port("127.0.0.1")
    server = subprocess.Popen(server_command(spec, "127.0.0.1", port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/v1"
        started = wait_until_ready(url, 30, server.poll, lambda: "")
        print(f"server start-up: {started:.2f} s")
        client = EmbeddingClient(url, spec.served_model())
        loop = asyncio.new_event_loop()
        for batch in (1, 32):
            figure = rate(lambda b: loop.run_until_complete(client.embed(pool[b])), batch, args.seconds)
            print(f"over HTTP,  batch {batch:2d}: {figure:8.0f} texts/s")
        loop.close()
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
