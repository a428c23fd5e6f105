"""How each method's context grows: the oracle's prompt tokens per step by request, counted.

Usage: ``python perf/context_growth.py [--job jobs/oracle.yaml] [--job jobs/oracle-memoryarena.yaml]``.
Runs each job (the oracle test fixture: deterministic, no model) with its tokens counted by SmolLM2's
own tokenizer and chat template (``analysis.count_tokens: smollm2``), then prints, per benchmark and
method, the median prompt tokens of an agent step in request k = 1, 2, 4, 8, … (the requests a task
has: τ-bench's oracle conversations have few, MemoryArena's tasks up to 8 subtasks), and each
method's ratio to Full Context at the same k, per benchmark and domain. A deterministic picture of what each method puts in
front of the model as a task goes on; every method the job lists appears, through the plug-in
interface.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import duckdb
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import machine  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
BASELINE = "full_context"


def depths(deepest: int) -> list[int]:
    """1, 2, 4, 8, ... up to the deepest request, and the deepest itself."""
    out, k = [], 1
    while k <= deepest:
        out.append(k)
        k *= 2
    return out if out[-1] == deepest else [*out, deepest]


def growth(sweep_dir: Path) -> list[tuple[str, str, int, float, int]]:
    """(benchmark/domain, method, request, median prompt tokens per step, steps) over every agent step."""
    glob = str(sweep_dir / "steps" / "**" / "*.parquet")
    return duckdb.sql(f"""
        SELECT benchmark || '/' || domain, method, request, median(prompt_tokens), count(*)
        FROM read_parquet('{glob}', union_by_name = true, hive_partitioning = false)
        WHERE prompt_tokens IS NOT NULL GROUP BY ALL ORDER BY ALL""").fetchall()


def show(rows: list[tuple[str, str, int, float, int]]) -> None:
    for benchmark in sorted({r[0] for r in rows}):
        mine = [r for r in rows if r[0] == benchmark]
        ks = depths(max(r[2] for r in mine))
        value = {(r[1], r[2]): r[3] for r in mine}
        methods = sorted({r[1] for r in mine}, key=lambda m: (not m.startswith(BASELINE), m))
        base = next((m for m in methods if m.startswith(BASELINE)), None)
        print(f"\n{benchmark}: median prompt tokens per agent step, by request (ratio to {base or 'none'})")
        print(f"{'method':<22}" + "".join(f"{f'k={k}':>16}" for k in ks))
        for method in methods:
            cells = []
            for k in ks:
                v, b = value.get((method, k)), value.get((base, k)) if base else None
                ratio = f" ({v / b:.2f}x)" if v is not None and b else ""
                cells.append(f"{v:,.0f}{ratio}" if v is not None else "-")
            print(f"{method:<22}" + "".join(f"{c:>16}" for c in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", action="append", type=Path, help="an oracle job (default: jobs/oracle.yaml)")
    args = parser.parse_args()
    print(machine())
    from pipeline.run.launch import run_sweep

    for job_path in args.job or [REPO / "jobs" / "oracle.yaml"]:
        job = yaml.safe_load(job_path.read_text())
        job.setdefault("analysis", {})["count_tokens"] = "smollm2"
        with tempfile.TemporaryDirectory() as scratch:
            path = Path(scratch) / job_path.name
            path.write_text(yaml.safe_dump(job))
            result = run_sweep(path, out=Path(scratch) / "runs")
            print(f"{job_path.name}: {result.completed} episodes in {result.duration_s:.0f} s")
            show(growth(result.sweep_dir))


if __name__ == "__main__":
    main()
