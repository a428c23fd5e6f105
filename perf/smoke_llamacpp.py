"""The smoke job with SmolLM2-135M on llama.cpp: serving figures, prefix-cache share, parse errors.

Runs jobs/smoke.yaml (JSON protocol, enforced by the server's grammar) and the same job on the
tagged protocol (nothing enforced), then prints per protocol and method: agent model calls per
second, mean prompt and completion tokens per call, the share of prompt tokens served from the
prefix cache (llama.cpp reports none, so this is the labelled estimate: tokens shared with the
previous prompt on the same server), and the parse-error rate (steps with a protocol error).

Run: python perf/smoke_llamacpp.py [--tasks N]   (about 10-20 minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import duckdb
import yaml
from machine import machine

REPO = Path(__file__).resolve().parents[1]


def variant(folder: Path, protocol: str, tasks: int) -> Path:
    job = yaml.safe_load((REPO / "jobs" / "smoke.yaml").read_text())
    job["name"] = f"smoke-{protocol}"
    for method in job["methods"]:
        method["protocol"] = protocol
    for bench in job["benchmarks"]:
        bench.pop("tasks")
        bench["limit"] = tasks
    path = folder / f"smoke-{protocol}.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def figures(sweep_dir: Path) -> list[tuple]:
    steps = str(sweep_dir / "steps" / "**" / "*.parquet")
    episodes = str(sweep_dir / "episodes" / "**" / "*.parquet")
    return duckdb.sql(f"""
        WITH wall AS (SELECT epoch(max(finished_at)) - epoch(min(started_at)) AS seconds
                        FROM read_parquet('{episodes}', hive_partitioning = false))
        SELECT method, count(*) AS calls,
               count(*) / any_value(wall.seconds) AS calls_per_s,
               avg(prompt_tokens) AS prompt, avg(completion_tokens) AS completion,
               sum(cached_tokens_estimate) / sum(prompt_tokens) AS cached_share_est,
               avg(CASE WHEN n_parse_errors > 0 THEN 1 ELSE 0 END) AS parse_error_rate
        FROM read_parquet('{steps}', hive_partitioning = false), wall
        GROUP BY method ORDER BY method""").fetchall()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=2, help="tasks per domain")
    args = parser.parse_args()
    os.environ.setdefault("FLOWSTATE_DATA", str(REPO.parent / "shared" / "benchmarks"))
    sys.path.insert(0, str(REPO))
    from pipeline.run.launch import run_sweep

    print(machine())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{Path(tmp) / 'mlflow.db'}"  # not the user's store
        for protocol in ("json", "tagged"):
            result = run_sweep(variant(Path(tmp), protocol, args.tasks), out=Path(tmp) / "runs")
            rows += figures(result.sweep_dir)
    print(f"\n{'method (protocol)':<22} {'calls':>5} {'calls/s':>8} {'prompt tok':>10} {'compl. tok':>10} "
          f"{'cached share (est.)':>19} {'parse errors':>12}")
    for method, calls, rate, prompt, completion, cached, errors in rows:
        print(f"{method:<22} {calls:>5} {rate:>8.3f} {prompt:>10.0f} {completion:>10.1f} {cached:>19.1%} {errors:>12.1%}")


if __name__ == "__main__":
    main()
