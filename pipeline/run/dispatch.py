"""Phase 2 of ``flowstate run``: start the models, run the planned episodes on Ray actors, show progress.

Episodes run in Ray actors (local ``ray.init()`` by default, a cluster through ``address``).
The driver keeps at most ``execution.concurrency`` episodes in flight, retries an episode whose
actor died or whose model calls kept failing (up to ``execution.episode_attempts``), then records
it as failed and goes on. Ctrl-C or SIGTERM (:mod:`pipeline.run.stopping`), while Ray and the models
start or while episodes run, stops dispatching, cancels what is running and keeps everything
finished: a later run of the same job resumes from the episodes table. A driver whose claim another
driver took over (:mod:`pipeline.store.claim`) dispatches no further episode: it cancels what is in flight
(its actors store nothing more, the new holder runs those episodes) and writes nothing more.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import ray
from ray.exceptions import RayActorError, RayError, RayTaskError
from rich.console import Console
from rich.live import Live

from flowstate import ProtocolMode
from pipeline.config.job import JobConfig
from pipeline.config.sweep import Sweep
from pipeline.core.data import DATA_ENV_VAR
from pipeline.core.disk_full import storage_failure
from pipeline.core.fault_injection import actor_env, crash_point
from pipeline.core.specs import EpisodeSpec
from pipeline.llm import verify_schema_enforcement
from pipeline.llm.closing import aclose_caller
from pipeline.llm.deployments import Deployment, make_deployment
from pipeline.llm.placement import on_this_node
from pipeline.run.actors import EpisodeActor, EpisodeAttemptError, EpisodeSummary, Meter, describe_error
from pipeline.run.calls import CallFault
from pipeline.run.plan import Plan
from pipeline.run.rows import failure_rows
from pipeline.run.stopping import keeping_stop_handlers, raise_if_stopping
from pipeline.run.tally import EpisodeTally
from pipeline.store.claim import ClaimLostError, SweepClaim
from pipeline.store.manifest import code_version
from pipeline.store.reader import FAILED, select
from pipeline.store.writer import episode_file, remove_orphan_temporaries, write_episode

POLL_S = 0.5
ACTORS_GONE_S = 10.0  # how long a stopped sweep waits for its killed actors to be gone
METER_EVERY_S = 2.0
# Told of each finished episode: its summary, or None for one recorded as an infrastructure failure.
OnEpisode = Callable[[EpisodeSpec, EpisodeSummary | None], None]


@dataclass(kw_only=True)
class Progress(EpisodeTally):
    """Counters the progress display reads; updated by the dispatch loop only."""

    total: int
    skipped: int
    retried: int = 0
    running: int = 0
    # Model traffic so far, running episodes included (from the actors' meters).
    total_tokens: int = 0
    model_calls: int = 0
    started: float = field(default_factory=time.monotonic)

    @property
    def todo(self) -> int:
        return self.total - self.skipped

    def eta_s(self) -> float | None:
        if not self.finished:
            return None
        rate = self.finished / max(time.monotonic() - self.started, 1e-9)
        return (self.todo - self.finished) / rate


def _fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


def status_line(p: Progress) -> str:
    """The sweep's episodes done, as its files will hold them: those earlier runs finished included
    (counted apart; the outcomes and the rates are this run's), the words the SQL's columns use."""
    elapsed = time.monotonic() - p.started
    rate = p.finished / elapsed if elapsed > 0 else 0.0
    mean = f" · mean reward {p.reward_sum / p.rewarded:.3f}" if p.rewarded else ""
    earlier = f"{p.skipped} by earlier runs, " if p.skipped else ""
    return (f"episodes {p.skipped + p.finished}/{p.total} done ({earlier}{p.completed} ok, {p.failed} failed, "
            f"{p.grading_failed} grading failed{f', {p.retried} retries' if p.retried else ''}) · "
            f"{p.running} running · {p.model_calls} model calls · "
            f"{p.total_tokens:,} tokens · {rate * 3600:,.0f} episodes/h · ETA {_fmt_duration(p.eta_s())}{mean}")


def dispatch(plan: Plan, *, address: str | None, console: Console,
             on_started: Callable[[dict[str, Any]], None] = lambda described: None,
             on_episode: OnEpisode = lambda spec, summary: None, claim: SweepClaim | None = None) -> tuple[Progress, bool]:
    """Run the plan's episodes still to do; returns the progress and whether the user interrupted.
    ``on_started`` receives the started deployments' descriptions (for the manifest), ``on_episode``
    each episode as it finishes (for live tracking); ``claim``, the sweep's, is checked before each
    episode (:class:`~pipeline.store.claim.ClaimLostError` once another driver took it over)."""
    progress = Progress(total=len(plan.sweep.episodes), skipped=len(plan.done))
    todo = plan.todo
    if not todo:
        return progress, False
    deployments: dict[str, Deployment] = {}
    try:
        init_ray(address)
        deployments = start_deployments(plan.sweep.job)
        check_schema_enforcement(plan.sweep.job, deployments)
        on_started({name: d.describe() for name, d in deployments.items()})
        progress.started = time.monotonic()  # rates count from the first dispatch, not from start-up
        return progress, _with_status(plan, deployments, todo, progress, console, on_episode, claim)
    except KeyboardInterrupt:  # while Ray or the models started (the episode loop handles its own)
        console.print("interrupted while starting: no episode ran; run the same command again to resume")
        return progress, True
    finally:
        stop_deployments(deployments)


def init_ray(address: str | None) -> None:
    """Start (or join) Ray, keeping this process's Ctrl-C and SIGTERM handlers (``ray.init``
    replaces SIGTERM's)."""
    if ray.is_initialized():
        return
    env = {k: os.environ[k] for k in (DATA_ENV_VAR,) if k in os.environ}
    # A job's own plug-in modules next to it must import in the actors too (``plugins:``).
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.getcwd(), os.environ.get("PYTHONPATH")) if p)
    with keeping_stop_handlers():
        crash_point("starting")
        ray.init(address=address or os.environ.get("RAY_ADDRESS") or None, include_dashboard=False,
                 log_to_driver=False, runtime_env={"env_vars": env})


def _with_status(plan: Plan, deployments: dict[str, Deployment], todo: Sequence[EpisodeSpec], progress: Progress,
                 console: Console, on_episode: OnEpisode, claim: SweepClaim | None) -> bool:
    """Run the episodes with a live status line; returns whether the user interrupted."""
    last_print = [0.0]

    def show(p: Progress) -> None:
        if live is not None:
            live.update(status_line(p))
        elif time.monotonic() - last_print[0] >= 10:
            last_print[0] = time.monotonic()
            console.print(status_line(p))

    live = Live(status_line(progress), console=console, refresh_per_second=2) if console.is_terminal else None
    try:
        if live is not None:
            live.start()
        Dispatcher(plan.sweep, plan.sweep_dir, deployments, progress, show, on_episode, claim).run(todo)
        return False
    except KeyboardInterrupt:
        console.print("interrupted: finished episodes are kept; run the same command again to resume")
        return True
    finally:
        if live is not None:
            live.stop()
        console.print(status_line(progress))


def actor_count(job: JobConfig, pending: int) -> int:
    """As many actors as the driver's node has cores, but no more than one per 8 episodes in flight."""
    if job.execution.actors:
        return job.execution.actors
    return max(1, min(os.cpu_count() or 1, math.ceil(min(job.execution.concurrency, pending) / 8)))


def start_deployments(job: JobConfig) -> dict[str, Deployment]:
    """Start every deployment the job names (once per sweep); stop the started ones on failure."""
    started: dict[str, Deployment] = {}
    try:
        for name, spec in job.deployments.items():
            deployment = make_deployment(spec)
            deployment.start()
            started[name] = deployment
    except BaseException:
        stop_deployments(started)
        raise
    return started


def check_schema_enforcement(job: JobConfig, deployments: Mapping[str, Deployment]) -> None:
    """For cells on the JSON protocol, check once that the agent's server really enforces a
    schema (vLLM silently ignores its removed guided_json parameter, for one)."""
    names = {agent.deployment for agent in job.agents}
    if not any(m.protocol is ProtocolMode.JSON for m in job.methods):
        return
    for name in sorted(names):
        deployment = deployments[name]
        if not getattr(deployment.spec, "check_schema_enforcement", False):  # served kinds only (ServedSpec)
            continue
        asyncio.run(_verify(deployment))


async def _verify(deployment: Deployment) -> None:
    policy = deployment.policy("schema-check", "agent")
    try:
        await verify_schema_enforcement(policy)
    finally:
        await aclose_caller(policy)


def stop_deployments(deployments: Mapping[str, Deployment]) -> None:
    for deployment in deployments.values():
        deployment.stop()


class EpisodeQueue:
    """What is left to dispatch: the plan's episodes, each spec built as it goes out (a sweep holds
    its episodes as ids), then the retries, in the order they failed."""

    def __init__(self, todo: Sequence[EpisodeSpec]) -> None:
        self._fresh = iter(todo)
        self._fresh_left = len(todo)
        self._retries: deque[tuple[EpisodeSpec, int]] = deque()

    def __bool__(self) -> bool:
        return bool(self._fresh_left or self._retries)

    def pop(self) -> tuple[EpisodeSpec, int]:
        """The next episode and its attempt number."""
        if self._fresh_left:
            self._fresh_left -= 1
            return next(self._fresh), 1
        return self._retries.popleft()

    def append(self, retry: tuple[EpisodeSpec, int]) -> None:
        self._retries.append(retry)


class Dispatcher:
    """Keeps the actor pool busy, retries failures, records final failures."""

    def __init__(self, sweep: Sweep, sweep_dir: Path, deployments: Mapping[str, Deployment],
                 progress: Progress, on_update: Callable[[Progress], None], on_episode: OnEpisode,
                 claim: SweepClaim | None = None) -> None:
        self.sweep = sweep
        self.job = sweep.job
        self.sweep_dir = sweep_dir
        self.deployments = dict(deployments)
        self.progress = progress
        self.on_update = on_update
        self.on_episode = on_episode
        self.claim = claim
        self.version = code_version()
        self.actors: list[Any] = []
        self.slots: dict[int, int] = {}
        # Last meter reading per live actor, and the sum over replaced (dead) actors.
        self.meters: dict[int, Meter] = {}
        self.retired = Meter()
        self._metered_at = 0.0
        # ObjectRef -> (actor index, episode, attempt, dispatch time)
        self.in_flight: dict[Any, tuple[int, EpisodeSpec, int, float]] = {}
        # The faults of an episode's failed attempts, until its next attempt stores them or it fails for good.
        self.faults: dict[str, list[CallFault]] = {}

    def _new_actor(self) -> Any:
        # On the driver's node; no CPU reservation: episodes mostly wait on models, and servers need the cores.
        hooks = actor_env()  # test hooks (pipeline.core.fault_injection) reach the actors on any cluster
        return EpisodeActor.options(  # type: ignore[attr-defined]  # an ActorClass once ray.remote wrapped it
            max_concurrency=self._per_actor + 1, num_cpus=0, scheduling_strategy=on_this_node(),
            runtime_env={"env_vars": hooks} if hooks else None).remote(
            self.job, str(self.sweep_dir), self.deployments, self.version,
            self.claim.fence if self.claim is not None else None)

    def run(self, todo: Sequence[EpisodeSpec]) -> None:
        n = actor_count(self.job, len(todo))
        self._per_actor = max(1, math.ceil(self.job.execution.concurrency / n))
        self.actors = [self._new_actor() for _ in range(n)]
        self.slots = {i: 0 for i in range(n)}
        queue = EpisodeQueue(todo)
        try:
            while queue or self.in_flight:
                raise_if_stopping()
                self._check_claim()  # also while only waiting: a lost claim stops the sweep
                while queue and len(self.in_flight) < self.job.execution.concurrency:
                    self._check_claim()  # before each episode: never one another driver runs too
                    spec, attempt = queue.pop()
                    self._submit(spec, attempt)
                self._collect(queue)
                self.progress.running = len(self.in_flight)
                self._read_meters()
                self.on_update(self.progress)
            self._read_meters(force=True)
        except (KeyboardInterrupt, ClaimLostError):
            for ref in list(self.in_flight):
                ray.cancel(ref, force=False)
            raise
        finally:
            self._stop_actors()

    def _check_claim(self) -> None:
        if self.claim is not None:
            self.claim.check()

    def _stop_actors(self) -> None:
        """Kill the actors; if any was mid-episode (the sweep stopped early), wait until it is gone
        (``ray.kill`` is asynchronous) and remove the temporaries its cut-short writes left (unless
        the sweep is another driver's now: those could be its)."""
        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        if self.in_flight:
            ray.wait(list(self.in_flight), num_returns=len(self.in_flight), timeout=ACTORS_GONE_S)
            if self.claim is None or not self.claim.lost.is_set():
                self._count_written()
                remove_orphan_temporaries(self.sweep_dir)

    def _count_written(self) -> None:
        """Count the episodes in flight when the sweep stopped that wrote their rows all the same (they
        finished before the stop reached them, returned or not): the progress line and the live runs
        then say what the files hold (a stop once counted 3 where 7 were written). An episode cut
        short is neither counted nor recorded: a resume runs it."""
        for ref, (_, spec, _, _) in list(self.in_flight.items()):
            try:
                summary: EpisodeSummary | None = ray.get(ref, timeout=0)
            except RayError:
                summary = written_summary(self.sweep_dir, spec)
            if summary is not None:
                del self.in_flight[ref]
                self.progress.add(summary)
                self.on_episode(spec, summary)
        self.progress.running = 0

    def _submit(self, spec: EpisodeSpec, attempt: int) -> None:
        index = min(self.slots, key=self.slots.__getitem__)
        ref = self.actors[index].run.remote(spec, attempt, self.faults.get(spec.episode_id, []))
        self.slots[index] += 1
        self.in_flight[ref] = (index, spec, attempt, time.monotonic())

    def _collect(self, queue: EpisodeQueue) -> None:
        ready, _ = ray.wait(list(self.in_flight), num_returns=1, timeout=POLL_S)
        for ref in ready:
            index, spec, attempt, _ = self.in_flight.pop(ref)
            self.slots[index] -= 1
            try:
                summary = ray.get(ref)
            except RayError as exc:  # the actor died, the episode raised, or it was cancelled
                self._check_claim()  # an actor that found the claim another's stored nothing
                if storage_failure(exc) is not None:
                    raise  # the disk's failure, not the episode's: stop at once (pipeline.core.disk_full)
                if isinstance(exc, RayActorError):
                    self._replace_actor(index)
                self._failed(spec, attempt, exc, queue)
                continue
            self.faults.pop(spec.episode_id, None)
            self.progress.add(summary)
            self.on_episode(spec, summary)
            crash_point("dispatch")

    def _replace_actor(self, index: int) -> None:
        """The actor died: its other episodes fail too and are retried; start a fresh one."""
        last = self.meters.pop(index, Meter())
        self.retired = Meter(calls=self.retired.calls + last.calls, tokens=self.retired.tokens + last.tokens)
        self.actors[index] = self._new_actor()

    def _read_meters(self, force: bool = False) -> None:
        """Live model calls and tokens, every few seconds (actors answer in their control group)."""
        if not force and time.monotonic() - self._metered_at < METER_EVERY_S:
            return
        self._metered_at = time.monotonic()
        refs = {i: actor.meter.remote() for i, actor in enumerate(self.actors)}
        for index, ref in refs.items():
            try:
                self.meters[index] = ray.get(ref, timeout=5)
            except RayError:
                continue  # a dying actor: its episodes will be retried and counted again
        self.progress.model_calls = self.retired.calls + sum(m.calls for m in self.meters.values())
        self.progress.total_tokens = self.retired.tokens + sum(m.tokens for m in self.meters.values())

    def _failed(self, spec: EpisodeSpec, attempt: int, exc: Exception, queue: EpisodeQueue) -> None:
        cause = exc.cause if isinstance(exc, RayTaskError) and exc.cause is not None else exc
        faults = self.faults.setdefault(spec.episode_id, [])
        if isinstance(cause, EpisodeAttemptError):  # else the actor died: its faults died with it
            faults += cause.faults
        if attempt < self.job.execution.episode_attempts:
            self.progress.retried += 1
            queue.append((spec, attempt + 1))
            return
        rows = failure_rows(spec, error=_describe(cause), attempts=attempt, code_version=self.version,
                            faults=self.faults.pop(spec.episode_id))
        write_episode(self.sweep_dir, spec.cell.cell_id, spec.episode_id, rows)
        self.progress.add(None)
        self.on_episode(spec, None)


def written_summary(sweep_dir: Path, spec: EpisodeSpec) -> EpisodeSummary | None:
    """An episode's summary read back from the episodes row its actor wrote (the last of its files);
    None if it wrote none. An infrastructure failure's row is the driver's own (an earlier run's,
    for an episode run again), never one an actor wrote."""
    path = episode_file(sweep_dir, "episodes", spec.cell.cell_id, spec.episode_id)
    if not path.exists():
        return None
    try:
        rows = select([path], "episode_id, status, termination, reward, n_steps AS steps, duration_s")
    except (OSError, duckdb.Error):  # counted as not written (a resume runs it), never the error of the stop
        return None
    if len(rows) != 1 or rows[0]["status"] == FAILED:
        return None
    return EpisodeSummary(**rows[0])


def _describe(cause: BaseException) -> str:
    """One readable line for the episodes table: the root cause, not Ray's wrapper traceback."""
    return cause.reason if isinstance(cause, EpisodeAttemptError) else describe_error(cause)
