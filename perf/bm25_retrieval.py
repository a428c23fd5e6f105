"""BM25 memory cost: storing an entry and one retrieval at 100, 1,000 and 10,000 pieces.

Usage: ``python perf/bm25_retrieval.py [--repeats N]``. Pieces are synthetic trajectory-like
texts (about 120 words from a 5,000-word vocabulary, so term statistics look like real text);
queries are 20-word requests. A retrieval after a store rebuilds the index (rank_bm25 keeps no
incremental one), which is how the method runs: one store per finished request, one retrieval per
new request. Figures are medians.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import machine  # noqa: E402

from flowstate.methods.bm25 import BM25Memory  # noqa: E402
from flowstate.methods.tokenizer import encoding  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    print(machine())
    rng = random.Random(7)
    vocabulary = [f"w{i}" for i in range(5000)]

    def text(words: int) -> str:
        return " ".join(rng.choice(vocabulary) for _ in range(words))

    start = time.perf_counter()
    encoding("o200k_base")
    print(f"o200k_base load (offline, once per process): {(time.perf_counter() - start) * 1000:.0f} ms")
    print(f"{'pieces':>7} {'store one entry':>16} {'retrieve (index rebuilt)':>25} {'retrieve again':>15}")
    for size in (100, 1_000, 10_000):
        memory = BM25Memory()
        for _ in range(size):
            memory.add(text(120))
        stores, rebuilt, warm = [], [], []
        for _ in range(args.repeats):
            entry, query = text(120), text(20)
            t0 = time.perf_counter()
            memory.add(entry)
            t1 = time.perf_counter()
            memory.retrieve(query, 3)
            t2 = time.perf_counter()
            memory.retrieve(query, 3)
            t3 = time.perf_counter()
            stores.append((t1 - t0) * 1000)
            rebuilt.append((t2 - t1) * 1000)
            warm.append((t3 - t2) * 1000)
        print(f"{size:>7,} {statistics.median(stores):>13.2f} ms {statistics.median(rebuilt):>22.1f} ms "
              f"{statistics.median(warm):>12.1f} ms")


if __name__ == "__main__":
    main()
