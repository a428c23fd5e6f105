"""The shopping store at scale: start-up, memory and search latency over a made-up product database.

Usage: ``python perf/shopping_store.py [--products 100000] [--words 300] [--queries 300]``.
The database is written by the generator in the real files' format, each description padded with
``--words`` made-up words (650) so a record is about the size of a WebShop one (the real
``items_shuffle.json`` is about 5 GB for 1,181,436 products, some 4.5 KB each: an estimate, the file
is not here). Measured in fresh processes: the first start (stream the products, build the BM25
index, cache it), a start from the cached index, the peak resident memory of each, and the latency
of queries of 2–4 words taken from product names (median and 95th percentile). The last lines
extrapolate linearly to 1.18 M products (loading and memory are linear in the records; a query's
cost grows with its terms' posting lists, so linear is an upper bound for rare terms).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import machine, rss_mib  # noqa: E402

FULL = 1_181_436


def open_store(db: str, queries: int) -> dict[str, float]:
    """In this (fresh) process: open the store, time queries, report peak memory."""
    import bm25s  # noqa: F401 - imported before the baseline, as the store imports it

    from pipeline.benchmarks.memoryarena.shopping.store import ProductStore

    baseline = rss_mib()  # the interpreter and imports
    started = time.perf_counter()
    store = ProductStore.open(Path(db))
    opened = time.perf_counter() - started
    held = rss_mib() - baseline
    rng = random.Random(3)
    names = [p.title.replace(",", "").split() for p in rng.sample(store.products, min(queries, len(store.products)))]
    latencies, hits = [], []
    for words in names:
        query = " ".join(rng.sample(words, min(len(words), rng.randint(2, 4))))
        t0 = time.perf_counter()
        hits.append(len(store.search(query)))
        latencies.append(time.perf_counter() - t0)
    latencies.sort()
    return {"open_s": opened, "built": float(store.index_built), "products": len(store.products),
            "rss_mib": rss_mib("VmHWM"), "held_mib": held,
            "p50_ms": statistics.median(latencies) * 1000, "p95_ms": latencies[int(0.95 * (len(latencies) - 1))] * 1000,
            "hits_mean": statistics.mean(hits)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--products", type=int, default=100_000)
    parser.add_argument("--words", type=int, default=650, help="made-up words per description")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--open", help=argparse.SUPPRESS)  # internal: measure in this process
    args = parser.parse_args()
    if args.open:
        print(json.dumps(open_store(args.open, args.queries)))
        return
    print(machine())
    from pipeline.benchmarks.memoryarena.shopping.checkdb import check_db
    from pipeline.benchmarks.memoryarena.shopping.generate import write_product_db
    from pipeline.benchmarks.memoryarena.shopping.productdb import ITEMS

    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, "FLOWSTATE_CACHE": str(Path(scratch) / "cache")}
        db = Path(scratch) / "db"
        t0 = time.perf_counter()
        count = write_product_db(db, args.products, description_words=args.words)
        size = (db / ITEMS).stat().st_size
        print(f"wrote {count:,} products in {time.perf_counter() - t0:.1f} s: {ITEMS} {size / 2**20:,.0f} MiB "
              f"({size / count / 1024:.1f} KiB per product)")
        t0 = time.perf_counter()
        check_db(db)
        print(f"check-db (streamed): {time.perf_counter() - t0:.1f} s")
        runs = []
        for label in ("first start (index built)", "start from the cached index"):
            out = subprocess.run([sys.executable, __file__, "--open", str(db), "--queries", str(args.queries)], env=env,
                                 capture_output=True, text=True, check=True).stdout
            runs.append(json.loads(out.strip().splitlines()[-1]))
            r = runs[-1]
            print(f"{label}: {r['open_s']:.1f} s, peak RSS {r['rss_mib']:,.0f} MiB (the store holds {r['held_mib']:,.0f} "
                  f"MiB); search p50 {r['p50_ms']:.1f} ms, "
                  f"p95 {r['p95_ms']:.1f} ms ({r['hits_mean']:.0f} hits on average, top 50)")
        index_mib = sum(p.stat().st_size for p in (Path(scratch) / "cache").rglob("*") if p.is_file()) / 2**20
        print(f"cached index and checksums: {index_mib:,.0f} MiB")
        scale = FULL / count
        first, cached = runs
        print(f"extrapolated to {FULL:,} products (x{scale:.1f}, linear): first start {first['open_s'] * scale / 60:.0f} "
              f"min, cached start {cached['open_s'] * scale / 60:.1f} min, store memory "
              f"{first['held_mib'] * scale / 1024:.1f} GiB after building, "
              f"{cached['held_mib'] * scale / 1024:.1f} GiB from the cache; search p50 <= "
              f"{cached['p50_ms'] * scale:.0f} ms")


if __name__ == "__main__":
    main()
