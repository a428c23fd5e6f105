"""Planning a sweep of 1,000,000 episodes: expansion with every id, and the resume check against 100,000 done.

The job is the oracle job's shape (τ-bench airline and retail, all 164 tasks, FlowState and Full
Context) with enough trials for ``--episodes`` (3,049 trials: 1,000,072 episodes). The done
episodes are the sweep's first ``--done`` (what an interrupted run leaves: the driver dispatches in
sweep order), one in 1,000 of them recorded as an infrastructure failure, written in one of two
forms, each with the four tables an oracle episode writes (steps, transcript, messages, episodes):

- ``parts``: one compacted part per table and cell (a finished sweep, or ``flowstate compact``);
- ``files``: one file per table and episode (an interrupted sweep), each episodes file with its
  inventory record.

Each phase runs in a fresh process and prints its wall time and peak RSS (``VmHWM``, imports
included; "imports" is the RSS before the phase starts):

- ``expand``: load the job, expand it into cells and episodes with their ids;
- ``plan``: the same plus the resume check (``plan_sweep``: the done and failed episodes read from
  the sweep's episodes table, and the episodes still to run);
- ``verify``: the quick check of every visible file a resume runs before planning (size, footer,
  record; informational).

Target: ``plan`` under 10 s and 1 GiB at 1,000,000 episodes and 100,000 done. The ids' SHA-256 (over
every id in sweep order) is printed so runs of two code versions can be compared.

Run: python perf/planning_scale.py [--episodes 1000000] [--done 100000] [--forms parts files]
     [--repeats 3] [--fixtures runs/planning-scale]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "perf"))

from machine import machine, rss_mib  # noqa: E402

TABLES = ("steps", "transcript", "messages", "episodes")
EPISODES_PER_TRIAL = 328  # 164 tasks × 2 methods


def job_file(folder: Path, episodes: int) -> Path:
    job = yaml.safe_load((REPO / "jobs" / "oracle.yaml").read_text())
    job.update(name="planning-scale", trials=math.ceil(episodes / EPISODES_PER_TRIAL))
    job.pop("analysis", None)  # no tokenizer: planning never loads it
    path = folder / f"planning-scale-{episodes}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    return path


# -- the done episodes on disk -------------------------------------------------------------------
def _rows(sweep, episodes: list) -> dict[str, object]:
    """One row per episode for each table (ids and a status; the other columns null)."""
    import pyarrow as pa

    from pipeline.store.schema import SCHEMA_VERSION, SCHEMAS

    ids = {
        "schema_version": [SCHEMA_VERSION] * len(episodes), "sweep_id": [sweep.sweep_id] * len(episodes),
        "cell_id": [e.cell.cell_id for e in episodes], "cell": [e.cell.label for e in episodes],
        "episode_id": [e.episode_id for e in episodes], "task_id": [e.task_id for e in episodes],
        "trial": [e.trial for e in episodes], "benchmark": [e.cell.benchmark.benchmark for e in episodes],
        "domain": [e.cell.domain for e in episodes], "method": [e.cell.method.name for e in episodes],
        "model": [e.cell.agent.name for e in episodes],
    }
    status = ["failed" if _failed(i) else "completed" for i in range(len(episodes))]
    tables = {}
    for table in TABLES:
        schema = SCHEMAS[table]
        columns = {**ids, **({"status": status} if table == "episodes" else {})}
        arrays = [pa.array(columns[f.name], f.type) if f.name in columns else pa.nulls(len(episodes), f.type)
                  for f in schema]
        tables[table] = pa.Table.from_arrays(arrays, schema=schema)
    return tables


def _failed(index: int) -> bool:
    """One in 1,000 done episodes is an infrastructure failure."""
    return index % 1000 == 999


def build_fixture(job: Path, root: Path, form: str, done: int) -> Path:
    """``root``/<sweep id> with the sweep's first ``done`` episodes in ``form``; reused when ready.

    Per-episode files of the tables besides episodes are hard links to one file per cell, without
    records (only their names and footers are read before a resume; writing 300,000 files takes
    too long on a shared 2-core machine)."""
    import pyarrow.parquet as pq

    from pipeline.config.job import load_job
    from pipeline.config.sweep import expand
    from pipeline.store.files import PART_META_KEY, PART_PREFIX
    from pipeline.store.inventory import FileRecord, record_path

    sweep = expand(load_job(job))
    sweep_dir = root / sweep.sweep_id
    ready = sweep_dir / f"READY-{done}"
    if ready.exists():
        return root
    episodes = [e for _, e in zip(range(done), sweep.episodes, strict=False)]
    tables = _rows(sweep, episodes)
    by_cell: dict[str, list[int]] = {}
    for i, e in enumerate(episodes):
        by_cell.setdefault(e.cell.cell_id, []).append(i)
    for table, rows in tables.items():
        for cell_id, held in by_cell.items():
            # an infrastructure failure has an episodes row and no other (pipeline.run.rows.failure_rows)
            indices = held if table == "episodes" else [i for i in held if not _failed(i)]
            folder = sweep_dir / table / f"cell={cell_id}"
            folder.mkdir(parents=True, exist_ok=True)
            if form == "parts":
                held = sorted(episodes[i].episode_id for i in indices)
                path = folder / f"{PART_PREFIX}00000000000000000001-bench.parquet"
                pq.write_table(rows.take(indices).replace_schema_metadata(
                    {PART_META_KEY: json.dumps({"episodes": held, "replaces": []})}), path, compression="zstd")
                _record(path, len(indices), held, record_path, FileRecord)
            elif table != "episodes":
                for n, i in enumerate(indices):
                    template = folder / f".template-{n // 60_000}.parquet"  # ext4 allows 65,000 links to a file
                    if not template.exists():
                        pq.write_table(rows.slice(i, 1), template)
                    os.link(template, folder / f"{episodes[i].episode_id}.parquet")
            else:
                for i in indices:
                    path = folder / f"{episodes[i].episode_id}.parquet"
                    pq.write_table(rows.slice(i, 1), path, compression="snappy", use_dictionary=False,
                                   write_statistics=False)
                    _record(path, 1, [episodes[i].episode_id], record_path, FileRecord)
        print(f"  fixture: {table} written ({form})", flush=True)
    ready.touch()
    return root


def _record(path: Path, rows: int, episodes: list[str], record_path, file_record) -> None:
    """The file's inventory record, as the writer makes it."""
    data = path.read_bytes()
    record = record_path(path)
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(file_record(rows=rows, bytes=len(data), sha256=hashlib.sha256(data).hexdigest(),
                                  episodes=sorted(episodes)).model_dump_json())


# -- one phase in this process -------------------------------------------------------------------
def phase(name: str, job: Path, out: Path | None) -> dict[str, object]:
    from pipeline.config.job import load_job
    from pipeline.config.sweep import expand
    from pipeline.run.plan import plan_sweep
    from pipeline.store.verify import verify_sweep

    imports = rss_mib()
    started = time.perf_counter()
    result: dict[str, object] = {}
    if name == "expand":
        sweep = expand(load_job(job))
        result["episodes"] = len(sweep.episodes)
    elif name == "plan":
        plan = plan_sweep(job, out=out)
        sweep = plan.sweep
        result.update(episodes=len(sweep.episodes), done=len(plan.done), retry=len(plan.retry), todo=len(plan.todo))
    else:
        (sweep_dir,) = (d for d in out.iterdir() if d.is_dir())
        verification = verify_sweep(sweep_dir, thorough=False)
        result.update(checked=verification.checked, problems=len(verification.problems))
    result.update(seconds=time.perf_counter() - started, peak_mib=rss_mib("VmHWM"), imports_mib=imports)
    if name == "expand":  # after the measurement: every id, to compare code versions
        digest = hashlib.sha256()
        for spec in sweep.episodes:
            digest.update(spec.episode_id.encode())
        result["ids_sha256"] = digest.hexdigest()[:16]
    return result


def run_phase(name: str, job: Path, out: Path | None) -> dict[str, object]:
    command = [sys.executable, __file__, "--phase", name, "--job", str(job)] + (["--out", str(out)] if out else [])
    done = subprocess.run(command, check=True, capture_output=True, text=True, cwd=REPO)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1_000_000)
    parser.add_argument("--done", type=int, default=100_000)
    parser.add_argument("--forms", nargs="+", default=["parts", "files"], choices=["parts", "files"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fixtures", type=Path, default=REPO / "runs" / "planning-scale")
    parser.add_argument("--no-verify", action="store_true", help="skip the informational verify phase")
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    parser.add_argument("--job", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        print(json.dumps(phase(args.phase, args.job, args.out)))
        return

    print(machine())
    job = job_file(args.fixtures, args.episodes)
    runs = [("expand", None, "expand")]
    for form in args.forms:
        out = build_fixture(job, args.fixtures / f"{form}-{args.done}", form, args.done)
        runs.append(("plan", out, f"plan, {args.done:,} done as {form}"))
        if not args.no_verify:
            runs.append(("verify", out, f"verify before resuming, {args.done:,} done as {form}"))
    for name, out, label in runs:
        results = [run_phase(name, job, out) for _ in range(args.repeats)]
        seconds = statistics.median(r["seconds"] for r in results)
        peak = max(r["peak_mib"] for r in results)
        extra = {k: v for k, v in results[0].items() if k not in ("seconds", "peak_mib", "imports_mib")}
        each = ", ".join(f"{r['seconds']:.2f}" for r in results)
        print(f"{label}: {seconds:.2f} s median of {len(results)} ({each}), "
              f"peak RSS {peak:,.0f} MiB (imports {results[0]['imports_mib']:,.0f} MiB); {extra}", flush=True)


if __name__ == "__main__":
    main()
