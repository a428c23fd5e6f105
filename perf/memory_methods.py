"""What ReasoningBank and Mem0 cost besides their model calls: a store and a retrieval with
instant stand-ins for the memory model (the oracle's memory fixture) and WordLlama embeddings in
process, at 10 and 100 stored entries.

Usage: ``python perf/memory_methods.py``. Entries are ~80-word trajectory-like texts; the
figures are medians of the timed operations at each size (Mem0: Qdrant in local mode on disk,
its history database, its prompt building and parsing; ReasoningBank: cosine over the records).
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import machine  # noqa: E402

from flowstate import Embeddings, MethodCallers, RequestEnd, RequestOutcome, RequestStart, TaskPrompt, new_session  # noqa: E402
from pipeline.llm.kinds.wordllama.model import TextEmbedder  # noqa: E402
from pipeline.run.scripted_policies import UnchangedStatePolicy  # noqa: E402

WORDS = ("flight reservation passenger seat baggage refund cabin economy business date airport order item "
         "exchange return address payment gift card user asked agent confirmed tool result").split()


class InProcessWordLlama:
    """WordLlama without HTTP, so the figures are the method's own cost."""

    def __init__(self) -> None:
        self.model = TextEmbedder()

    async def embed(self, texts):
        return Embeddings(vectors=self.model.embed(list(texts)).tolist())


async def measure(method: str, sizes: tuple[int, ...], rng: random.Random) -> dict[int, tuple[float, float]]:
    session = new_session(method, TaskPrompt(task_policy="P", available_tools="T"),
                          callers=MethodCallers(memory=UnchangedStatePolicy(), embeddings=InProcessWordLlama()))
    figures, stores, stored = {}, [], 0
    try:
        for size in sizes:
            stores = []
            while stored < size:
                entry = " ".join(rng.choice(WORDS) for _ in range(80))
                start = time.perf_counter()
                await session.end_request(RequestOutcome(index=1, query="q", ended=RequestEnd.RESPONSE, final_response="ok",
                                                         steps=[], memory_entries=[entry]))
                stores.append(time.perf_counter() - start)
                stored += 1
            retrievals = []
            for _ in range(10):
                query = " ".join(rng.choice(WORDS) for _ in range(15))
                start = time.perf_counter()
                await session.retrieve(query)
                retrievals.append(time.perf_counter() - start)
            figures[size] = (statistics.median(stores) * 1000, statistics.median(retrievals) * 1000)
    finally:
        await session.aclose()
    return figures


def main() -> None:
    print(machine())
    rng = random.Random(5)
    for method in ("reasoningbank", "mem0"):
        asyncio.run(new_session_warmup(method))
        for size, (store, retrieve) in asyncio.run(measure(method, (10, 100), rng)).items():
            print(f"{method:13s} at {size:3d} entries: store {store:7.2f} ms, retrieval {retrieve:7.2f} ms")


async def new_session_warmup(method: str) -> None:
    """Imports and first-use costs (Mem0's import, Qdrant's first collection) out of the timings."""
    session = new_session(method, TaskPrompt(task_policy="P", available_tools="T"),
                          callers=MethodCallers(memory=UnchangedStatePolicy(), embeddings=InProcessWordLlama()))
    start = time.perf_counter()
    await session.begin_request(RequestStart(index=1, query="q", memory_query="q"))
    await session.end_request(RequestOutcome(index=1, query="q", ended=RequestEnd.RESPONSE, final_response="ok",
                                             steps=[], memory_entries=["warm up"]))
    print(f"{method:13s} first store of a process: {(time.perf_counter() - start) * 1000:.0f} ms")
    await session.aclose()


if __name__ == "__main__":
    main()
