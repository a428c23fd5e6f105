"""The pipeline's own CPU per model call (client, actor, asyncio, records), the server excluded.

Usage: ``python perf/call_cpu.py [--episodes 64] [--concurrency 16] [--profile 16]``.
A stand-in OpenAI-compatible server in its own process answers every call with the oracle's output
for that episode after 50 ms (so episodes have the oracle's real shape). Part 1 runs a sweep on Ray
and reads the CPU time (user + system, from /proc) of the episode actors' processes and of the
driver, per agent model call: over the whole sweep (the actors' start-up included), and while it
runs at full speed (the actors' CPU over time against the calls of the episodes that finished
meanwhile, the first and last tenth of its episodes left out: a per-process start-up is paid once,
not per call). Part 2 runs episodes in this process (the same episode code an actor
runs, without Ray) under cProfile on the CPU clock and prints the functions with the most own CPU
time: where a call's CPU goes (one-time costs of a process, such as TLS contexts, included; the
profiler's own overhead inflates the per-call figure of this part).

The sweep is written where sweeps are written (a temporary folder under ``--out``, the repository's
``runs/`` by default), not under ``/tmp``: on the machines here creating a file in ``/tmp`` costs
about 50 times the CPU it costs elsewhere on the same disk, which would swamp what is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import machine  # noqa: E402
from pipeline_throughput import _calls_and_window, _wait_for, job_file  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")
STEADY = 0.8  # the share of a sweep's episodes whose calls measure the CPU per call at full speed


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, ppid, ...)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _cpu_s(pid: int) -> tuple[float, float] | None:
    """User and system CPU seconds of ``pid``."""
    fields = _stat(pid)
    return None if fields is None else (int(fields[11]) / TICK, int(fields[12]) / TICK)


def _descends_from(pid: int, ancestor: int) -> bool:
    """Whether ``ancestor`` is a parent, grandparent, ... of ``pid`` (this sweep's own Ray cluster
    starts its raylet, which starts the actors: another sweep's actors on the machine are not ours)."""
    while pid > 1:
        fields = _stat(pid)
        if fields is None:
            return False
        pid = int(fields[1])
        if pid == ancestor:
            return True
    return False


class ActorCpu:
    """Polls /proc for this process's descendants named ``ray::EpisodeActor`` and keeps each one's
    last CPU reading, and the sum over them at every poll (wall time, CPU seconds)."""

    def __init__(self) -> None:
        self.seen: dict[int, tuple[float, float]] = {}
        self.series: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit():
                    continue
                try:
                    title = (entry / "cmdline").read_bytes().split(b"\0")[0]
                except OSError:
                    continue
                if title.startswith(b"ray::EpisodeActor") and _descends_from(int(entry.name), os.getpid()):
                    cpu = _cpu_s(int(entry.name))
                    if cpu is not None:
                        self.seen[int(entry.name)] = cpu
            self.series.append((time.time(), sum(user + system for user, system in self.seen.values())))
            time.sleep(0.1)

    def at(self, moment: float) -> float:
        """The actors' CPU seconds at ``moment`` (linear between the two polls around it)."""
        after = next(i for i, (t, _) in enumerate(self.series) if t >= moment)
        (t0, c0), (t1, c1) = self.series[max(after - 1, 0)], self.series[after]
        return c1 if t1 == t0 else c0 + (c1 - c0) * (moment - t0) / (t1 - t0)

    def __enter__(self) -> ActorCpu:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def finished_calls(sweep_dir: Path) -> list[tuple[float, int]]:
    """(when it finished, its agent calls) of every finished episode, in order."""
    import duckdb

    episodes = str(sweep_dir / "episodes" / "**" / "*.parquet")
    return duckdb.sql(f"SELECT epoch(finished_at), n_steps FROM read_parquet('{episodes}', hive_partitioning = false) "
                      "ORDER BY finished_at").fetchall()


def steady_ms_per_call(actors: ActorCpu, finished: list[tuple[float, int]]) -> tuple[float, int]:
    """The actors' CPU per call while the sweep runs at full speed: between the moments the first
    and the last STEADY share of its episodes finished, the CPU spent over the calls of the episodes
    that finished in between (start-up before, the drain after, both left out). Returns (ms, calls)."""
    low, high = round(len(finished) * (1 - STEADY) / 2), round(len(finished) * (1 + STEADY) / 2) - 1
    start, end = finished[low][0], finished[high][0]
    calls = sum(steps for _, steps in finished[low + 1: high + 1])
    return 1000 * (actors.at(end) - actors.at(start)) / calls, calls


def on_ray(job: Path, out_root: Path) -> None:
    from pipeline.run.launch import run_sweep

    driver_before = resource.getrusage(resource.RUSAGE_SELF)
    with ActorCpu() as actors, tempfile.TemporaryDirectory(dir=out_root) as out:
        result = run_sweep(job, out=Path(out))
        calls, wall = _calls_and_window(result.sweep_dir)
        steady, steady_calls = steady_ms_per_call(actors, finished_calls(result.sweep_dir))
    driver_after = resource.getrusage(resource.RUSAGE_SELF)
    driver = (driver_after.ru_utime + driver_after.ru_stime) - (driver_before.ru_utime + driver_before.ru_stime)
    user, system = (sum(times) for times in zip(*actors.seen.values(), strict=True))
    actor_s = user + system
    print(f"on Ray: {result.completed} episodes, {calls} agent calls in {wall:.1f} s; episode actors "
          f"{actor_s:.1f} CPU s = {1000 * actor_s / calls:.2f} ms per call ({len(actors.seen)} processes, their "
          f"start-up included; user {user:.1f} s, system {system:.1f} s); driver {driver:.1f} CPU s = "
          f"{1000 * driver / calls:.2f} ms per call")
    print(f"  while running at full speed (the middle {STEADY:.0%} of episodes, {steady_calls} calls, start-up "
          f"and drain left out): episode actors {steady:.2f} ms CPU per call")


def in_process(job: Path, episodes: int, top: int, out_root: Path) -> None:
    """The actor's episode code in this process, profiled."""
    from pipeline.config.job import load_job
    from pipeline.config.sweep import expand
    from pipeline.run.actors import EpisodeWorker
    from pipeline.run.dispatch import start_deployments

    loaded = load_job(job)
    specs = expand(loaded).episodes[:episodes]
    deployments = start_deployments(loaded)
    with tempfile.TemporaryDirectory(dir=out_root) as out:
        worker = EpisodeWorker(loaded, Path(out), deployments, "benchmark")

        async def run_all() -> list[int]:
            summaries = await asyncio.gather(*(worker.run(spec, 1) for spec in specs))
            return [s.steps for s in summaries]

        profile = cProfile.Profile(time.process_time)  # CPU time, not waiting
        started = time.process_time()
        profile.enable()
        steps = asyncio.run(run_all())
        profile.disable()
        cpu = time.process_time() - started
    calls = sum(steps)
    print(f"\nin one process (no Ray): {len(specs)} episodes, {calls} agent calls, {cpu:.2f} CPU s = "
          f"{1000 * cpu / calls:.2f} ms per call (profiled: cProfile's own overhead included)")
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(top)
    lines = text.getvalue().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("ncalls"))
    print("\n".join(lines[start: start + top + 1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--delay", type=float, default=0.05)
    parser.add_argument("--profile", type=int, default=16, help="episodes of the profiled in-process run (0: none)")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--port", type=int, default=18511)
    parser.add_argument("--out", type=Path, default=REPO / "runs", help="where the sweeps are written")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    print(machine())
    url = f"http://127.0.0.1:{args.port}/v1"
    with tempfile.TemporaryDirectory() as folder:
        job = job_file(Path(folder), name="call-cpu", base_url=url, episodes=args.episodes,
                       concurrency=args.concurrency)
        server = subprocess.Popen([sys.executable, str(REPO / "perf" / "pipeline_throughput.py"), "serve",
                                   str(job), str(args.port), str(args.delay)],
                                  cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
        try:
            _wait_for(url)
            on_ray(job, args.out)
            if args.profile:
                in_process(job, args.profile, args.top, args.out)
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
