"""MLflow logging at the end of a sweep, per cell: this code against an older commit, at 100 cells.

Builds a compacted sweep of synthetic rows shaped like real ones (perf/sql_scale.py's
generator: episodes of 3–8 requests and 10–60 steps, with messages and transcripts) over 100 cells
(2 domains × 10 methods × 5 models), then times ``log_sweep`` (metrics, 3 traces per cell, the
summary tables, the report) into a fresh local sqlite store, each run in a fresh process:

- after the fact: the sweep was never logged (``flowstate track DIR``; what the old code did at the
  end of every sweep), old and new code, runs interleaved (this VM's speed drifts);
- at the end of a live sweep (new code): the parent and cell runs are already open, as live
  tracking leaves them;
- again, nothing changed (a re-log).

Prints wall and CPU seconds per cell (medians), where the new code's time went, and how many
traces each version left in the store, with the machine.

Run: python perf/mlflow_logging.py [--rows 1000000] [--repeats 3] [--old main] [--data DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import machine  # noqa: E402 - perf/ is not a package
from sql_scale import SWEEP, generate  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CELLS = [(d, f"method-{m}", f"model-{a}") for d in ("airline", "retail") for m in range(10) for a in range(5)]
SAMPLES = 3

# Runs in a fresh process with PYTHONPATH at the code under test; prints one JSON line.
MEASURE = """
import json, sys, time
from pathlib import Path
from mlflow import MlflowClient
from pipeline.tracking.mlflow_log import log_sweep
sweep, uri, experiment, scenario, samples = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
if scenario == "live-end":  # the runs as live tracking leaves them: open, RUNNING
    from pipeline.analysis import mlflow_runs as runs
    from pipeline.analysis.query import connect
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment).experiment_id
    parent = runs.new_parent(client, exp, sweep.name, None).info.run_id
    with connect(sweep) as con:
        cells = con.sql("SELECT cell_id, any_value(cell) AS cell, any_value(sweep_id) AS sweep_id, any_value(benchmark)"
                        " AS benchmark, any_value(domain) AS domain, any_value(method) AS method, any_value(model)"
                        " AS model FROM episodes GROUP BY cell_id").to_arrow_table().to_pylist()
    for cell in cells:
        runs.log_new(client, runs.child_run(client, exp, parent, cell, {}), runs.cell_params(cell),
                     {"live.episodes_done": 1.0}, step=1)
wall, cpu = time.perf_counter(), time.process_time()
result = log_sweep(sweep, experiment=experiment, tracking_uri=uri, trace_samples_per_cell=samples)
print(json.dumps({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
                  "cells": len(result.child_run_ids), "phases": getattr(result, "phases_s", None)}))
"""


def build(root: Path, rows: int) -> Path:
    steps, files = generate(root, rows, small=False, cells=CELLS, parts=1)
    print(f"sweep: {len(CELLS)} cells, {steps:,} step rows, {files:,} compacted parts", flush=True)
    return root / SWEEP


def old_code(ref: str, into: Path) -> Path:
    """The repository at ``ref``, exported (its pipeline/ and sql/ are what the old runs import)."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def measure(code: Path, sweep: Path, store: Path, scenario: str) -> dict[str, Any]:
    """One timed ``log_sweep`` in a fresh process; ``store`` is reused for "again"."""
    from mlflow import MlflowClient

    uri = f"sqlite:///{store / 'mlflow.db'}"
    if scenario != "again":
        store.mkdir(parents=True)
        # the schema is created here, untimed; artifacts next to the store
        MlflowClient(uri).create_experiment("bench", artifact_location=(store / "artifacts").as_uri())
    manifest = (sweep / "manifest.json").read_bytes()
    env = {**os.environ, "PYTHONPATH": str(code)}
    try:
        out = subprocess.run([sys.executable, "-c", MEASURE, str(sweep), uri, "bench", scenario, str(SAMPLES)],
                             env=env, check=True, capture_output=True, text=True, cwd=store).stdout
    finally:
        (sweep / "manifest.json").write_bytes(manifest)  # no run remembered from another store
    result = json.loads(out.strip().splitlines()[-1])
    experiment = MlflowClient(uri).get_experiment_by_name("bench").experiment_id
    result["traces"] = _count_traces(MlflowClient(uri), experiment)
    return result


def _count_traces(client: Any, experiment: str) -> int:
    count, token = 0, None
    while True:
        page = client.search_traces(locations=[experiment], include_spans=False, max_results=500, page_token=token)
        count += len(page)
        token = page.token
        if not token:
            return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="step rows in all (about 35 per episode)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--old", default="main", help="the git ref to compare with (empty: none)")
    parser.add_argument("--data", type=Path, help="keep the sweep here and reuse it on the next run")
    args = parser.parse_args()
    print(machine(), flush=True)
    work = Path(tempfile.mkdtemp(prefix="flowstate-mlflow-bench-"))
    try:
        data = args.data or work / "data"
        sweep = data / SWEEP if (data / SWEEP / "manifest.json").exists() else build(data, args.rows)
        versions = {"new": REPO}
        if args.old:
            versions[f"old ({args.old})"] = old_code(args.old, Path(tempfile.mkdtemp(dir=work)))
        scenarios = [(name, "after-the-fact") for name in versions] + [("new", "live-end"), ("new", "again")]
        results: dict[tuple[str, str], list[dict[str, Any]]] = {key: [] for key in scenarios}
        for repeat in range(args.repeats):
            for name, scenario in scenarios:
                # a fresh store per run; "again" re-logs into the store the new code just logged to
                kind = "after-the-fact" if scenario == "again" else scenario
                store = work / "store" / f"{repeat}-{name.split()[0]}-{kind}"
                r = measure(versions[name], sweep, store, scenario)
                results[(name, scenario)].append(r)
                print(f"  run {repeat + 1}: {name:<12} {scenario:<15} {r['wall'] / r['cells']:6.3f} s/cell wall, "
                      f"{r['cpu'] / r['cells']:6.3f} s/cell CPU, {r['traces']} traces in the store", flush=True)
        print(f"\nmedians over {args.repeats} runs, {len(CELLS)} cells, {SAMPLES} traces per cell:")
        print(f"{'code':<14}{'scenario':<16}{'wall s/cell':>12}{'CPU s/cell':>12}{'traces':>8}")
        for (name, scenario), runs in results.items():
            wall = statistics.median(r["wall"] / r["cells"] for r in runs)
            cpu = statistics.median(r["cpu"] / r["cells"] for r in runs)
            print(f"{name:<14}{scenario:<16}{wall:>12.3f}{cpu:>12.3f}{runs[-1]['traces']:>8}")
        for (name, scenario), runs in results.items():
            if runs[0]["phases"]:
                phases = {k: statistics.median(r["phases"][k] for r in runs) for k in runs[0]["phases"]}
                print(f"{name} {scenario}: " + ", ".join(f"{k} {v / len(CELLS):.3f}" for k, v in phases.items())
                      + " s/cell")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
