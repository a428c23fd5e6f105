"""Crash soak: a driver SIGKILLed at random moments, again and again, then a final run; the results
must equal those of an uninterrupted run of the same job. Then a killed actor, the same way.

The oracle job's shape (τ-bench airline and retail, FlowState and Full Context, ``--episodes``
episodes), its agent the oracle fixture behind a stub OpenAI server on 127.0.0.1 that answers after
``--delay`` seconds (so that episodes, not start-up, fill most of a run), the scripted user. One local
Ray head, started here, serves every driver (``flowstate run --address``), so a killed driver is
what it is on a cluster: its actors are ended by Ray, the cluster stays. Steps:

1. reference: an uninterrupted ``flowstate run`` of the job (its wall time D);
2. soak: the same job under another name (same episode ids), each driver SIGKILLed at a moment
   drawn uniformly from half the reference's start-up (until its first episode was done) to the
   end of the start-up plus twice a kill's share of its episodes' time: kills land in the start-up,
   among running episodes and in the finishing steps; ``--kills`` times (fewer if a driver ends on
   its own first: the sweep is then complete), then a run to the end;
3. a killed actor: another copy, one EpisodeActor process SIGKILLed once a quarter of the episodes
   are done (the driver replaces it and retries its episodes);
4. each compared with the reference (:mod:`pipeline.analysis.digest`): episode ids, statuses,
   rewards, MLflow metrics but timings, rows per table and episode (lost, duplicated), one MLflow
   parent with one child per cell.

Printed: the machine; per kill, when it came and the episodes done before and after; the time lost
(the soak's total wall time minus D); the runs; and each comparison.

Run: python benchmarks/soak.py [--kills 10] [--episodes 160] [--concurrency 4] [--delay 0.1] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from machine import machine  # noqa: E402
from pipeline_throughput import job_file  # noqa: E402


def start_driver(job: Path, out: Path, address: str, env: dict[str, str]) -> subprocess.Popen:
    """``flowstate run`` of ``job`` on the cluster at ``address``, its output appended to ``<job>.log``."""
    with job.with_suffix(".log").open("a") as log:
        return subprocess.Popen([sys.executable, "-m", "pipeline.cli", "run", str(job), "--out", str(out),
                                 "--address", address], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)


def done(sweep_dir: Path) -> int:
    from pipeline.store.reader import finished_episodes

    return len(finished_episodes(sweep_dir).done)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (this script's Ray: the raylet and its workers), from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def episode_actors() -> list[int]:
    pids = []
    for pid in descendants(os.getpid()):
        try:
            if b"EpisodeActor" in Path(f"/proc/{pid}/cmdline").read_bytes():
                pids.append(pid)
        except OSError:
            continue
    return pids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--episodes", type=int, default=160)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--delay", type=float, default=0.1, help="the stub server's answer time (s)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(machine())
    import ray

    from pipeline.analysis.digest import compare, sweep_digest
    from pipeline.config import load_job
    from pipeline.fixtures.oracle_server import OracleResponder
    from pipeline.llm.stub_server import StubServer
    from pipeline.sweep import expand
    from pipeline.testhooks import wait_until_settled

    rng = random.Random(args.seed)
    folder = Path(tempfile.mkdtemp(prefix="flowstate-soak-"))
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{folder / 'mlflow.db'}"
    os.environ.setdefault("FLOWSTATE_DATA", str(REPO.parent / "shared" / "benchmarks"))
    ray.init(include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}})
    address = ray.get_runtime_context().gcs_address
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # after ray.init: the drivers take the cluster's authentication mode
    out = folder / "runs"

    probe = job_file(folder, name="probe", base_url="http://127.0.0.1:9/v1", episodes=args.episodes, concurrency=1)
    server = StubServer(OracleResponder(expand(load_job(probe)).by_id), delay_s=args.delay, model="oracle")

    def job(name: str) -> tuple[Path, Path]:  # every copy has the same episode ids (a name is not part of them)
        path = job_file(folder, name=name, base_url=server.url, episodes=args.episodes, concurrency=args.concurrency)
        return path, out / expand(load_job(path)).sweep_id

    def run_to_end(path: Path, sweep_dir: Path) -> tuple[float, float, float]:
        """Seconds until the first episode was done, until the last, and until the driver ended."""
        started, first, last, total = time.monotonic(), None, None, len(expand(load_job(path)).episodes)
        driver = start_driver(path, out, address, env)
        while driver.poll() is None:
            finished = done(sweep_dir)
            first = first or (time.monotonic() - started if finished else None)
            last = last or (time.monotonic() - started if finished == total else None)
            time.sleep(0.2)
        if driver.returncode != 0:
            raise SystemExit(f"{path.name}: flowstate run exited {driver.returncode} (see {path.with_suffix('.log')})")
        ended = time.monotonic() - started
        return first or ended, last or ended, ended

    try:
        server.start()
        reference_job, reference_dir = job("soak-reference")
        first_s, last_s, reference_s = run_to_end(reference_job, reference_dir)
        reference = sweep_digest(reference_dir)
        # kill moments: from half the start-up to its end plus twice a kill's share of the episodes' time
        window = (0.5 * first_s, first_s + 2 * (last_s - first_s) / args.kills)
        print(f"reference: {len(reference.episodes)} episodes, uninterrupted run {reference_s:.1f} s (D): first episode "
              f"done at {first_s:.1f} s, last at {last_s:.1f} s; kills drawn in [{window[0]:.1f}, {window[1]:.1f}] s")

        soak_job, soak_dir = job("soak")
        soak_started, kills, runs = time.monotonic(), 0, 0
        print("kill  at (s)  episodes done before -> after")
        while kills < args.kills:
            before, at = done(soak_dir), rng.uniform(*window)
            driver, runs = start_driver(soak_job, out, address, env), runs + 1
            try:
                driver.wait(timeout=at)
                print(f"      the driver ended on its own (exit {driver.returncode}) before its kill at {at:.1f} s")
                break  # the sweep is complete: nothing is left to interrupt
            except subprocess.TimeoutExpired:
                driver.send_signal(signal.SIGKILL)
                driver.wait()
                kills += 1
            wait_until_settled(soak_dir)
            print(f"{kills:>4}  {at:6.1f}  {before:>4} -> {done(soak_dir)}")
        if driver.returncode != 0:
            run_to_end(soak_job, soak_dir)
            runs += 1
        soak_s = time.monotonic() - soak_started
        soaked = compare(reference, sweep_digest(soak_dir))
        print(f"soak: {kills} kills, {runs} runs, {soak_s:.1f} s in all, "
              f"{soak_s - reference_s:.1f} s lost against D "
              f"({soak_s / reference_s:.1f} D); lost {soaked.lost} rows, duplicated {soaked.duplicated}, "
              f"{'same results' if soaked.same else 'DIFFERENT: ' + '; '.join(soaked.differences)}")

        actor_job, actor_dir = job("soak-actor")
        driver = start_driver(actor_job, out, address, env)
        while done(actor_dir) < len(reference.episodes) // 4 and driver.poll() is None:
            time.sleep(0.2)
        killed = episode_actors()[:1]
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
        driver.wait()
        hit = compare(reference, sweep_digest(actor_dir))
        print(f"killed actor: {len(killed)} actor process killed at {len(reference.episodes) // 4} episodes done, "
              f"driver exit {driver.returncode}; lost {hit.lost} rows, duplicated {hit.duplicated}, "
              f"{'same results' if hit.same else 'DIFFERENT: ' + '; '.join(hit.differences)}")
    finally:
        server.stop()
        ray.shutdown()
    print(f"files: {folder}")


if __name__ == "__main__":
    main()
