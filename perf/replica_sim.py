"""Cluster-scale planning on simulated GPU replicas: routing × replicas × method.

Runs the oracle-shaped τ-bench workload (the oracle fixture's real outputs, generated over HTTP by
the replicas; scripted user; every agent call through the pipeline's client and router) against 1, 2 and 4 simulated
replicas (``kind: replica_sim``: the stand-in server in replica mode, an H100 serving a 32B model by
default), with ``--per-replica`` episodes in flight per replica, sticky and least-loaded-only
routing, one sweep per method. Prints per sweep, over the steady window (from the first to the last
moment the sweep had all its episodes in flight): agent calls and episodes per simulated second or
hour, mean replica utilisation (the share of simulated time a replica had a sequence in progress),
mean running batch, queueing, the cached share (reported cached / prompt tokens) beside the
reusable-prefix share and the physical limit (``physical_limit_tokens`` / prompt tokens) of the
same calls, and whether the goal holds (sticky: ≥ 90% busy, cached share within 5 points of the
limit).

Latencies are simulated on the real clock scaled by ``--time-scale`` (real seconds per simulated
second); the client's own time between a reply and the conversation's next call is printed in
simulated seconds, to show that the two cores here are not what limits the replicas.

Run: python perf/replica_sim.py [--replicas 1 2 4] [--routing sticky least_loaded]
     [--methods flowstate full_context] [--per-replica 64] [--waves 1.5] [--time-scale 4] [--results FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from machine import machine  # noqa: E402

from pipeline.llm.kinds.replica_sim.engine import ReplicaSettings  # noqa: E402
from pipeline.run.dispatch import init_ray  # noqa: E402

DOMAINS = {"airline": 50, "retail": 114}  # τ-bench's tasks per domain


def trials_and_limit(episodes: int) -> tuple[int, int]:
    """Trials, and tasks per domain, for at least ``episodes`` episodes: as few trials as possible
    (a task's trials send the same prompts, which a prefix cache would share)."""
    trials = math.ceil(episodes / sum(DOMAINS.values()))
    per_trial = math.ceil(episodes / trials)
    limit = next(n for n in range(1, max(DOMAINS.values()) + 1) if sum(min(n, t) for t in DOMAINS.values()) >= per_trial)
    return trials, limit


def job_file(folder: Path, *, replicas: int, routing: str, method: str, in_flight: int, episodes: int,
             replica: dict[str, Any]) -> Path:
    """One method on τ-bench against ``replicas`` simulated replicas, which generate the oracle's outputs."""
    name = f"replica-sim-{replicas}x-{routing}-{method}"
    path, stats = folder / f"{name}.yaml", folder / name / "stats"
    trials, limit = trials_and_limit(episodes)
    job = {
        "name": name,
        "plugins": ["pipeline.llm.kinds.replica_sim"],
        "benchmarks": [{"benchmark": "taubench", "domain": d, "reward_basis": "classic", "limit": limit} for d in DOMAINS],
        "methods": [{"name": method}],
        "agents": [{"deployment": "agent", "label": "oracle"}],
        "user_simulator": "scripted", "judge": "none",
        "deployments": {"agent": {
            "kind": "replica_sim", "replicas": replicas, "routing": routing, "replica": replica,
            "script": "oracle", "stats_dir": str(stats),
            "client": {"max_in_flight": 4096, "timeout_s": 3600.0}}},
        "trials": trials,
        "execution": {"concurrency": in_flight},
    }
    path.write_text(yaml.safe_dump(job))
    return path


@dataclasses.dataclass
class Run:
    """One sweep's figures; times are simulated seconds, over the steady window."""

    replicas: int
    routing: str
    method: str
    episodes: int
    reward: float  # mean over the episodes: the oracle's is 1 wherever the workload ran as it should
    window_s: float
    calls: int  # answered within the window, all replicas
    calls_per_s: float
    episodes_per_h: float
    output_tokens_per_s: float
    utilisation: float  # mean over replicas of the share of the window with a sequence in progress
    mean_batch: float  # sequences running, averaged over the window
    queue_s: float  # mean wait before a call's first step
    latency_s: float  # mean time from a call's arrival to its last token
    client_gap_s: float  # median time from a reply to the conversation's next call: the clients' and CPU's share
    lag_s: float  # most real seconds an engine fell behind its clock
    cached: float  # reported cached tokens / prompt tokens, every call
    cached_follow_ups: float  # the same over follow-up calls
    reusable: float  # reusable prefix / prompt tokens, follow-up calls
    limit: float  # physical limit / prompt tokens, follow-up calls
    wall_s: float  # real seconds, the whole sweep

    @property
    def goal_met(self) -> bool:
        return self.utilisation >= 0.9 and self.cached_follow_ups >= self.limit - 0.05


def steady_window(sweep_dir: Path, target: int) -> tuple[float, float, list[str]]:
    """Wall-clock start and end of the time the sweep had ``target`` episodes in flight (or its
    most, if it never reached it), and the errors of the episodes left out of it: a failed episode's
    row has no start time (the infrastructure failed it on every attempt)."""
    import duckdb

    episodes = str(sweep_dir / "episodes" / "**" / "*.parquet")
    rows = duckdb.sql(f"SELECT epoch(started_at), epoch(finished_at), coalesce(error, status) FROM read_parquet("
                      f"'{episodes}', hive_partitioning = false)").fetchall()
    timed = [(s, f) for s, f, _ in rows if s is not None and f is not None]
    untimed = [str(why) for s, f, why in rows if s is None or f is None]
    events = sorted([(s, 1) for s, _ in timed] + [(f, -1) for _, f in timed], key=lambda e: (e[0], e[1]))
    level, peak, at = 0, 0, []
    for t, step in events:
        level += step
        at.append((t, level))
        peak = max(peak, level)
    full = [t for t, n in at if n >= min(target, peak)]
    return full[0], full[-1], untimed


def cache_shares(sweep_dir: Path) -> dict[str, float]:
    """Reported cached, reusable-prefix and physical-limit tokens as shares of the agent's prompt
    tokens (``sql/tokens.sql``'s columns), over every call and over follow-up calls only: a
    conversation's first call has no physical limit (nothing of it came before), though the cache
    may hold what it shares with other conversations (the system prompt)."""
    import duckdb

    steps = str(sweep_dir / "steps" / "**" / "*.parquet")
    row = duckdb.sql(f"""
        WITH calls AS (
            SELECT *, row_number() OVER (PARTITION BY episode_id ORDER BY request, step) > 1 AS follow_up
            FROM read_parquet('{steps}', hive_partitioning = false))
        SELECT sum(cached_tokens) / sum(prompt_tokens),
               sum(cached_tokens) FILTER (follow_up) / sum(prompt_tokens) FILTER (follow_up),
               sum(reusable_prefix_tokens) FILTER (follow_up) / sum(prompt_tokens) FILTER (follow_up),
               sum(physical_limit_tokens) FILTER (follow_up) / sum(prompt_tokens) FILTER (follow_up),
               count(*) / count(DISTINCT episode_id)
        FROM calls""").fetchall()[0]
    return dict(zip(("cached", "cached_follow_ups", "reusable", "limit", "calls_per_episode"), row, strict=True))


def overlap(spans: list[list[float]], start: float, end: float) -> float:
    return sum(max(0.0, min(b, end) - max(a, start)) for a, b in spans)


def client_gaps(requests: list[dict[str, Any]], start: float, end: float) -> list[float]:
    """Per conversation, from each reply to its next call, for calls arriving in the window."""
    by_conversation: dict[str, list[dict[str, Any]]] = {}
    for r in requests:
        by_conversation.setdefault(r["conversation"], []).append(r)
    return [b["arrived"] - a["finished"] for calls in by_conversation.values()
            for a, b in itertools.pairwise(sorted(calls, key=lambda r: r["arrived"])) if start <= b["arrived"] <= end]


def summarise(replicas: int, routing: str, method: str, sweep_dir: Path, stats_dir: Path, target: int) -> Run:
    """The replicas' own figures over the steady window, the sweep's recorded tokens over all of it;
    prints the episodes the window leaves out."""
    import duckdb

    stats = [json.loads(p.read_text()) for p in sorted(stats_dir.glob("replica-*.json"))]
    if len(stats) != replicas:
        raise RuntimeError(f"{len(stats)} replica stats files in {stats_dir}, expected {replicas}")
    wall_start, wall_end, untimed = steady_window(sweep_dir, target)
    for why in untimed:
        print(f"  an episode without a start or finish time is left out of the steady window: {why}")
    windows, util, batch, inside, gaps = [], [], [], [], []
    for s in stats:
        scale = s["settings"]["time_scale"]
        start, end = (wall_start - s["t0_wall"]) / scale, (wall_end - s["t0_wall"]) / scale
        windows.append(end - start)
        util.append(overlap(s["busy"], start, end) / (end - start))
        batch.append(overlap([[r["started"], r["finished"]] for r in s["requests"]], start, end) / (end - start))
        inside += [r for r in s["requests"] if start <= r["finished"] <= end]
        gaps += client_gaps(s["requests"], start, end)
    window = statistics.mean(windows)
    shares = cache_shares(sweep_dir)
    episodes = str(sweep_dir / "episodes" / "**" / "*.parquet")
    reward = duckdb.sql(f"SELECT avg(coalesce(reward, 0)) FROM read_parquet('{episodes}', hive_partitioning = false)"
                        ).fetchall()[0][0]
    calls_per_s = len(inside) / window
    return Run(replicas, routing, method, episodes=0, reward=reward, window_s=window, calls=len(inside), calls_per_s=calls_per_s,
               episodes_per_h=calls_per_s / shares["calls_per_episode"] * 3600,
               output_tokens_per_s=sum(r["output_tokens"] for r in inside) / window,
               utilisation=statistics.mean(util), mean_batch=statistics.mean(batch),
               queue_s=statistics.mean(r["started"] - r["arrived"] for r in inside),
               latency_s=statistics.mean(r["finished"] - r["arrived"] for r in inside),
               client_gap_s=statistics.median(gaps), lag_s=max(s["lag_s"] for s in stats),
               cached=shares["cached"], cached_follow_ups=shares["cached_follow_ups"], reusable=shares["reusable"],
               limit=shares["limit"], wall_s=0.0)


def run_one(folder: Path, replicas: int, routing: str, method: str, per_replica: int, waves: float,
            replica: ReplicaSettings) -> Run:
    from pipeline.run.launch import run_sweep

    in_flight = per_replica * replicas
    job = job_file(folder, replicas=replicas, routing=routing, method=method, in_flight=in_flight,
                   episodes=math.ceil(waves * in_flight), replica=replica.model_dump())
    started = time.perf_counter()
    result = run_sweep(job, out=folder / "runs")
    run = summarise(replicas, routing, method, result.sweep_dir, folder / job.stem / "stats", in_flight)
    run.episodes, run.wall_s = result.completed, time.perf_counter() - started
    if result.failed:
        print(f"  ({result.failed} episodes failed)")
    return run


HEADER = (f"{'replicas':>8} {'routing':>12} {'method':>12} {'episodes':>8} {'reward':>6} {'window s':>8} {'calls':>6} "
          f"{'calls/s':>7} {'episodes/h':>10} {'out tok/s':>9} {'util':>6} {'batch':>5} {'queue s':>7} {'call s':>6} "
          f"{'gap s':>5} {'lag s':>5} {'cached':>6} {'cached*':>7} {'reusable*':>9} {'limit*':>6} {'goal':>4} {'wall s':>6}")


def row(r: Run) -> str:
    goal = ("met" if r.goal_met else "no") if r.routing != "least_loaded" else ""
    return (f"{r.replicas:>8} {r.routing:>12} {r.method:>12} {r.episodes:>8} {r.reward:>6.3f} {r.window_s:>8.0f} {r.calls:>6} "
            f"{r.calls_per_s:>7.2f} {r.episodes_per_h:>10,.0f} {r.output_tokens_per_s:>9,.0f} {r.utilisation:>6.1%} "
            f"{r.mean_batch:>5.1f} {r.queue_s:>7.2f} {r.latency_s:>6.2f} {r.client_gap_s:>5.2f} {r.lag_s:>5.2f} "
            f"{r.cached:>6.1%} {r.cached_follow_ups:>7.1%} {r.reusable:>9.1%} {r.limit:>6.1%} {goal:>4} {r.wall_s:>6.0f}")


def start_ray(attempts: int = 3) -> None:
    """Ray once, before the first sweep; on a busy machine its node can miss Ray's fixed 30 s
    start-up deadline, so it gets a few tries."""
    import ray

    for attempt in range(1, attempts + 1):
        try:
            init_ray(None)
            return
        except Exception as exc:  # noqa: BLE001 - Ray raises a bare Exception for this
            ray.shutdown()
            if attempt == attempts:
                raise
            print(f"Ray did not start ({exc}); trying again", flush=True)
            time.sleep(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, nargs="*", default=[1, 2, 4])
    parser.add_argument("--routing", nargs="*", default=["sticky", "least_loaded"])
    parser.add_argument("--methods", nargs="*", default=["flowstate", "full_context"])
    parser.add_argument("--per-replica", type=int, default=64, help="episodes in flight per replica")
    parser.add_argument("--waves", type=float, default=1.5, help="episodes per sweep, in multiples of those in flight")
    parser.add_argument("--time-scale", type=float, default=4.0, help="real seconds per simulated second")
    parser.add_argument("--replica", type=json.loads, default={}, help="other engine settings as JSON (ReplicaSettings)")
    parser.add_argument("--out", type=Path, default=REPO / "runs", help="where the sweeps are written")
    parser.add_argument("--results", type=Path, default=None, help="also append each sweep's figures here (JSON lines)")
    args = parser.parse_args()
    os.environ.setdefault("FLOWSTATE_DATA", str(REPO.parent / "shared" / "benchmarks"))
    replica = ReplicaSettings(**{**args.replica, "time_scale": args.time_scale})
    print(machine())
    print(f"clock: scaled real time, {args.time_scale:g} real s per simulated s (every time below is simulated); "
          f"engine: {replica.model_dump_json()}")
    print("* follow-up calls only (a conversation's first call has no physical limit)")
    args.out.mkdir(parents=True, exist_ok=True)
    runs = []
    with tempfile.TemporaryDirectory(dir=args.out) as tmp:
        folder = Path(tmp)
        os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{folder / 'mlflow.db'}"  # not the user's store
        start_ray()
        for replicas in args.replicas:
            # One replica takes every call whatever the routing: one run stands for both.
            for routing in args.routing if replicas > 1 else ["any"]:
                for method in args.methods:
                    print(f"[{datetime.now():%H:%M:%S}] {replicas} replica(s), {routing}, {method} ...", flush=True)
                    runs.append(run_one(folder, replicas, "sticky" if routing == "any" else routing, method,
                                        args.per_replica, args.waves, replica))
                    runs[-1].routing = routing
                    if args.results is not None:
                        with args.results.open("a") as results:
                            results.write(json.dumps(dataclasses.asdict(runs[-1])) + "\n")
                    print(HEADER, row(runs[-1]), f"load average {os.getloadavg()[0]:.1f}", sep="\n", flush=True)
    print("\n" + HEADER, *map(row, runs), sep="\n")


if __name__ == "__main__":
    main()
