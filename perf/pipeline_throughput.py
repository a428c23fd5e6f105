"""Sweep throughput against an OpenAI-compatible server on 127.0.0.1 that answers after 200 ms.

The server (a separate process) answers every call with the oracle fixture's output for that
episode, so episodes have the oracle's real shape (number of model calls, prompt sizes). Prints,
for 1, 8, 64 and 256 concurrent episodes: model calls per second and its fraction of the ideal
(concurrent episodes ÷ delay), episodes per hour through one driver; then the per-step pipeline
overhead (in-process oracle, no network) and Parquet rows written per second.

Run: python perf/pipeline_throughput.py [--levels 1 8 64 256] [--delay 0.2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from machine import machine  # noqa: E402


def job_file(folder: Path, *, name: str, base_url: str | None, episodes: int, concurrency: int,
             deployment: dict[str, Any] | None = None, plugins: Sequence[str] = ()) -> Path:
    """All 164 tasks × 2 methods per trial (328 episodes), or a per-domain limit for fewer. The agent
    is the oracle: behind ``base_url``, in-process without one, or ``deployment`` (whose kind may
    come from ``plugins``)."""
    trials = max(1, -(-episodes // 328))
    limit = None if episodes >= 328 else max(1, -(-episodes // 4))
    deployment = deployment or ({"kind": "endpoint", "base_url": base_url, "model": "oracle",
                                 "check_schema_enforcement": False, "client": {"max_in_flight": 1024}}
                                if base_url else {"kind": "scripted", "name": "oracle"})
    job = {
        "name": name,
        **({"plugins": list(plugins)} if plugins else {}),
        "benchmarks": [{"benchmark": "taubench", "domain": d, "reward_basis": "classic", "limit": limit}
                       for d in ("airline", "retail")],
        "methods": [{"name": "flowstate"}, {"name": "full_context"}],
        "agents": [{"deployment": "agent", "label": "oracle"}],
        "user_simulator": "scripted", "judge": "none",
        "deployments": {"agent": deployment},
        "trials": trials,
        "execution": {"concurrency": concurrency},
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def serve(job: Path, port: int, delay: float) -> None:
    """The server process: the oracle for every episode of ``job``, behind the stub server."""
    from pipeline.config.job import load_job
    from pipeline.config.sweep import expand
    from pipeline.llm.kinds.replica_sim.server import StubServer
    from pipeline.testing.oracle_server import OracleResponder

    with StubServer(OracleResponder(expand(load_job(job)).by_id), delay_s=delay, model="oracle", port=port):
        while True:
            time.sleep(3600)


def _wait_for(url: str) -> None:
    import httpx

    for _ in range(300):
        try:
            if httpx.get(f"{url}/models", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"stub server at {url} did not come up")


def level(concurrency: int, delay: float, folder: Path, port: int) -> dict[str, float]:
    """One sweep at ``concurrency`` episodes in flight, enough episodes to keep them busy."""
    from pipeline.run.launch import run_sweep

    url = f"http://127.0.0.1:{port}/v1"
    job = job_file(folder, name=f"throughput-{concurrency}", base_url=url, episodes=max(8, 4 * concurrency),
                   concurrency=concurrency)
    server = subprocess.Popen([sys.executable, __file__, "serve", str(job), str(port), str(delay)],
                              cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        _wait_for(url)
        started = time.perf_counter()
        result = run_sweep(job, out=folder / "runs")
        elapsed = time.perf_counter() - started
    finally:
        server.terminate()
        server.wait()
    calls, wall = _calls_and_window(result.sweep_dir)
    ideal = concurrency / delay
    return {"concurrency": concurrency, "episodes": result.completed, "failed": result.failed, "calls": calls,
            "wall_s": wall, "calls_per_s": calls / wall, "ideal": ideal, "fraction": calls / wall / ideal,
            "episodes_per_hour": result.completed / wall * 3600, "total_s": elapsed}


def _calls_and_window(sweep_dir: Path) -> tuple[int, float]:
    """Agent calls, and seconds from the first episode's start to the last one's end (actor
    start-up excluded: it is paid once per sweep, not per episode)."""
    import duckdb

    steps, episodes = (str(sweep_dir / t / "**" / "*.parquet") for t in ("steps", "episodes"))
    calls = duckdb.sql(f"SELECT count(*) FROM read_parquet('{steps}', hive_partitioning = false)").fetchall()[0][0]
    window = duckdb.sql(f"SELECT epoch(max(finished_at)) - epoch(min(started_at)) "
                        f"FROM read_parquet('{episodes}', hive_partitioning = false)").fetchall()[0][0]
    return calls, window


def step_overhead(folder: Path) -> tuple[float, float]:
    """Wall time per agent step with the in-process oracle (no network): everything but the model."""
    from pipeline.run.launch import run_sweep

    job = job_file(folder, name="overhead", base_url=None, episodes=328, concurrency=16)
    result = run_sweep(job, out=folder / "runs")
    steps, window = _calls_and_window(result.sweep_dir)
    return window / steps * 1e6, result.completed / window * 3600


def parquet_rows_per_s(folder: Path) -> float:
    """Rows per second through the atomic per-episode writer (one finished sweep's rows, rewritten)."""
    import pyarrow.parquet as pq

    from pipeline.store.writer import write_episode

    sweep = next((folder / "runs").glob("overhead-*"))
    episodes: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {}
    for table in ("steps", "transcript", "messages", "episodes"):
        for path in (sweep / table).glob("*/*.parquet"):  # compacted parts: an episode's rows are regrouped
            for row in pq.read_table(path).to_pylist():
                episodes.setdefault((row["cell_id"], row["episode_id"]), {}).setdefault(table, []).append(row)
    target = folder / "rewrite"
    started = time.perf_counter()
    for (cell, episode), rows in episodes.items():
        write_episode(target, cell, episode, rows)
    elapsed = time.perf_counter() - started
    return sum(len(r) for rows in episodes.values() for r in rows.values()) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--levels", type=int, nargs="*", default=[1, 8, 64, 256])
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument("--port", type=int, default=18181)
    args = parser.parse_args()
    os.environ.setdefault("FLOWSTATE_DATA", str(REPO.parent / "shared" / "benchmarks"))
    print(machine())
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{folder / 'mlflow.db'}"  # not the user's store
        overhead_us, eps_in_process = step_overhead(folder)
        rows_per_s = parquet_rows_per_s(folder)
        print(f"pipeline overhead per agent step (in-process oracle, 16 in flight): {overhead_us:,.0f} µs "
              f"({eps_in_process:,.0f} episodes/h without a model)")
        print(f"Parquet rows written per second (atomic per-episode files): {rows_per_s:,.0f}")
        print(f"\n{'in flight':>9} {'episodes':>8} {'calls':>7} {'calls/s':>8} {'ideal':>6} {'of ideal':>8} {'episodes/h':>11}")
        for concurrency in args.levels:
            r = level(concurrency, args.delay, folder, args.port)
            print(f"{concurrency:>9} {r['episodes']:>8} {r['calls']:>7} {r['calls_per_s']:>8.1f} {r['ideal']:>6.0f} "
                  f"{r['fraction']:>8.0%} {r['episodes_per_hour']:>11,.0f}"
                  + (f"  ({r['failed']} failed)" if r["failed"] else ""))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        serve(Path(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
    else:
        main()
