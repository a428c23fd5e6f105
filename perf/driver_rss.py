"""The driver's memory against the number of episodes: the oracle sweep, model-free, at 2,000, 10,000 and 20,000.

For each size, a fresh ``flowstate run`` of the oracle job's shape (τ-bench airline and retail, every
task, FlowState and Full Context, as many trials as the size needs; the scripted oracle agent and
user, so no model) with its own output folder and MLflow store. The driver's resident memory
(``VmRSS``) is sampled every second beside the episodes finished so far (from its status line, every
10 s). Printed per size: the episodes and wall time; RSS when the first status line came (Ray and the
actors started), at a quarter, half, three quarters and the end of the episodes; the peak of each
phase (start-up, episodes running, compaction, MLflow logging); and the growth while episodes ran,
per 1,000 finished episodes (least squares over the samples after the first quarter). Flat means
that growth is near zero and the running peak does not rise with the size.

Run: python perf/driver_rss.py [--episodes 2000 10000 20000] [--concurrency 32] [--csv samples.csv]
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "perf"))

from machine import machine, rss_mib  # noqa: E402
from pipeline_throughput import job_file  # noqa: E402

STATUS = re.compile(r"episodes (\d+)/(\d+) done")
PHASES = ("start-up", "running", "compaction", "MLflow logging")


@dataclass
class Run:
    episodes: int = 0
    wall_s: float = 0.0
    # (seconds since start, driver RSS MiB, episodes finished at the latest status line, phase)
    samples: list[tuple[float, float, int, str]] = field(default_factory=list)
    peak_mib: float = 0.0
    output: list[str] = field(default_factory=list)


def run(size: int, concurrency: int, folder: Path) -> Run:
    """One sweep of about ``size`` episodes in a driver process of its own, sampled every second."""
    folder.mkdir(parents=True, exist_ok=True)
    job = job_file(folder, name=f"driver-rss-{size}", base_url=None, episodes=size, concurrency=concurrency)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "MLFLOW_TRACKING_URI": f"sqlite:///{folder / 'mlflow.db'}",
           "FLOWSTATE_DATA": os.environ.get("FLOWSTATE_DATA", str(REPO.parent / "shared" / "benchmarks"))}
    driver = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "run", str(job), "--out", str(folder / "runs")],
                              cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    result = Run()
    state: dict[str, Any] = {"finished": 0, "phase": PHASES[0]}

    def read() -> None:
        assert driver.stdout is not None
        for line in driver.stdout:
            result.output.append(line.rstrip())
            match = STATUS.search(line)
            if match:
                state["finished"], result.episodes = int(match[1]), int(match[2])
                state["phase"] = "running" if state["finished"] < result.episodes else "compaction"
            elif line.startswith(("compacted ", "already compacted")):
                state["phase"] = "MLflow logging"
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    started = time.monotonic()
    while driver.poll() is None:
        rss = rss_mib(pid=driver.pid)
        if rss == rss:  # not NaN: the process is still there
            result.samples.append((time.monotonic() - started, rss, state["finished"], state["phase"]))
            peak = rss_mib("VmHWM", pid=driver.pid)
            result.peak_mib = max(result.peak_mib, peak if peak == peak else 0.0)
        time.sleep(1.0)
    reader.join(timeout=10)
    result.wall_s = time.monotonic() - started
    if driver.returncode != 0:
        raise RuntimeError(f"the sweep of {size} episodes failed:\n" + "\n".join(result.output[-30:]))
    return result


def summary(size: int, r: Run) -> str:
    running = [s for s in r.samples if s[3] == "running"]
    if not running:
        return f"{size}: no sample while episodes ran ({r.wall_s:.0f} s)"
    at = {}
    for share in (0.25, 0.5, 0.75, 1.0):
        reached = [s for s in r.samples if s[2] >= share * r.episodes]
        at[share] = reached[0][1] if reached else float("nan")
    later = [s for s in running if s[2] >= 0.25 * r.episodes]
    slope = statistics.linear_regression([s[2] for s in later], [s[1] for s in later]).slope * 1000 \
        if len({s[2] for s in later}) > 1 else float("nan")
    peaks = ", ".join(f"{phase} {max((s[1] for s in r.samples if s[3] == phase), default=float('nan')):,.0f}"
                      for phase in PHASES)
    return (f"{r.episodes:>7,} episodes in {r.wall_s / 60:5.1f} min | RSS MiB: started {running[0][1]:,.0f}, "
            f"25% {at[0.25]:,.0f}, 50% {at[0.5]:,.0f}, 75% {at[0.75]:,.0f}, 100% {at[1.0]:,.0f} | "
            f"peaks: {peaks} (VmHWM {r.peak_mib:,.0f}) | growth while running {slope:+.2f} MiB per 1,000 episodes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, nargs="+", default=[2_000, 10_000, 20_000])
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--folder", type=Path, default=REPO / "runs" / "driver-rss")
    parser.add_argument("--csv", type=Path, help="write every sample here (size, s, RSS MiB, finished, phase)")
    args = parser.parse_args()
    print(machine())
    rows = []
    for size in args.episodes:
        folder = args.folder / str(size)
        shutil.rmtree(folder, ignore_errors=True)
        result = run(size, args.concurrency, folder)
        print(summary(size, result), flush=True)
        rows += [(size, *sample) for sample in result.samples]
        shutil.rmtree(folder, ignore_errors=True)
    if args.csv:
        with args.csv.open("w", newline="") as handle:
            csv.writer(handle).writerows([("size", "seconds", "rss_mib", "finished", "phase"), *rows])


if __name__ == "__main__":
    main()
