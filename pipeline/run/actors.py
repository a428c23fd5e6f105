"""EpisodeActor: a Ray actor hosting episodes, each strictly sequential inside, several at once.

One actor runs many episodes as asyncio tasks, so a remote model stays busy without a process per
episode. Each finished episode writes its own rows (atomically) and returns a small summary; an
attempt that fails raises :class:`EpisodeAttemptError`, which carries its calls' faults to the
driver (it writes them with the episode's last attempt, finished or failed).
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import ray
from pydantic import BaseModel, ConfigDict

from flowstate import METHODS, Capability, ChatMessage, Completion, Embedder, Embeddings, Policy
from pipeline.benchmarks.base import benchmark_of
from pipeline.config.job import JobConfig
from pipeline.core.plugins import load_plugins
from pipeline.core.roles import Role
from pipeline.core.specs import EpisodeSpec
from pipeline.llm.closing import aclose_caller
from pipeline.llm.deployments import Deployment
from pipeline.run.calls import CallFault, CallLog
from pipeline.run.episode import EpisodeCallers, run_sweep_episode
from pipeline.run.models import EpisodeModels
from pipeline.run.rows import outcome_rows
from pipeline.store.claim import ClaimFence
from pipeline.store.schema import convert_rows_without_pandas
from pipeline.store.writer import encode_episode, store_episode


class EpisodeSummary(BaseModel):
    """What the driver needs for progress and retries; the rows themselves are on disk."""

    model_config = ConfigDict(extra="forbid")

    episode_id: str
    status: str
    termination: str
    reward: float | None
    steps: int
    duration_s: float


class EpisodeAttemptError(Exception):
    """An attempt of an episode failed: why (one line, for the episodes table) and the faults of its
    calls until then. Pickles whole, so it reaches the driver through Ray as it was raised."""

    def __init__(self, reason: str, faults: Sequence[CallFault] = ()) -> None:
        super().__init__(reason)
        self.reason = reason
        self.faults = list(faults)

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.reason, self.faults)


def describe_error(exc: BaseException) -> str:
    """One readable line for the episodes table: the exception's type and its last line."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1] if text else ''}"[:2000]


def preload(job: JobConfig) -> None:
    """Load the job's plug-ins and verify every cell's data now: data errors show at start-up, and
    the first episode of each cell does not pay for parsing its data."""
    load_plugins(job.plugins)
    for cell in job.benchmarks:
        benchmark_of(cell).preload(cell)


# Objects an episode makes before the cyclic collector looks (Python's default is 700): episodes
# allocate many short-lived containers that reference counting frees anyway.
GC_YOUNG_THRESHOLD = 10_000


def settle_heap() -> None:
    """After start-up, take what the process holds for good (modules, the benchmarks' data) out
    of the cyclic collector's full passes, and let it run less often: on τ-bench's oracle episodes
    the collector took about 6% of the CPU, and a third of that once settled (measured with
    ``gc.callbacks``). No collection first: start-up leaves a few dozen unreachable objects, and a
    full pass costs a tenth of a CPU second."""
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])


class Meter(BaseModel):
    """Model traffic of this process so far, finished and running episodes alike (for progress)."""

    calls: int = 0
    tokens: int = 0


class MeteredPolicy:
    """Counts calls and tokens as they happen, so the driver can show live totals."""

    def __init__(self, inner: Policy, meter: Meter) -> None:
        self.inner = inner
        self.meter = meter

    async def complete(self, messages: Sequence[ChatMessage], *, json_schema: Any = None) -> Completion:
        completion = await self.inner.complete(messages, json_schema=json_schema)
        self.meter.calls += 1
        self.meter.tokens += (completion.usage.prompt_tokens or 0) + (completion.usage.completion_tokens or 0)
        return completion

    async def aclose(self) -> None:
        await aclose_caller(self.inner)


class MeteredEmbedder:
    def __init__(self, inner: Embedder, meter: Meter) -> None:
        self.inner = inner
        self.meter = meter

    async def embed(self, texts: Sequence[str]) -> Embeddings:
        result = await self.inner.embed(texts)
        self.meter.calls += 1
        self.meter.tokens += result.prompt_tokens or 0
        return result

    async def aclose(self) -> None:
        await aclose_caller(self.inner)


class EpisodeWorker:
    """Runs and stores episodes in this process (the actor's body; usable without Ray in tests).
    With the ``fence`` of its driver's claim, it stores an episode only while that claim stands."""

    def __init__(self, job: JobConfig, sweep_dir: Path, deployments: Mapping[str, Deployment], code_version: str,
                 fence: ClaimFence | None = None) -> None:
        self.job = job
        self.sweep_dir = Path(sweep_dir)
        self.fence = fence
        self.models = EpisodeModels(deployments, count_tokens=job.analysis.count_tokens)
        self.code_version = code_version
        self.meter = Meter()
        preload(job)

    def _callers(self, spec: EpisodeSpec) -> EpisodeCallers:
        """Metered callers of the roles this episode's benchmark and method call."""
        benchmark_roles = benchmark_of(spec.cell.benchmark).episode_roles(spec.cell.benchmark)
        uses = METHODS.get(spec.cell.method.name).uses(spec.cell.method)

        def metered(role: Role, wanted: bool) -> Policy | None:
            policy = self.models.policy(spec, role) if wanted else None
            return None if policy is None else MeteredPolicy(policy, self.meter)

        embedder = self.models.embedder(spec) if Capability.EMBEDDINGS in uses else None
        agent = metered("agent", True)
        assert agent is not None, "a job's agents are models (JobConfig.agents)"
        return EpisodeCallers(
            agent=agent,
            user_simulator=metered("user_simulator", "user_simulator" in benchmark_roles),
            judge=metered("judge", "judge" in benchmark_roles),
            tool_model=metered("tool_model", "tool_model" in benchmark_roles),
            memory=metered("memory", Capability.MEMORY_MODEL in uses),
            embeddings=MeteredEmbedder(embedder, self.meter) if embedder is not None else None,
            agent_prompt_tokens=self.models.agent_prompt_tokens(spec),
        )

    async def run(self, spec: EpisodeSpec, attempt: int, earlier_faults: Sequence[CallFault] = ()) -> EpisodeSummary:
        """Run and store one attempt of an episode; ``earlier_faults``: those of its failed attempts,
        stored with its rows."""
        callers = self._callers(spec)
        log = CallLog(self.models.deployment_names(spec), attempt=attempt)
        try:
            outcome = await asyncio.wait_for(
                run_sweep_episode(spec, callers, self.job.limits, log),
                timeout=self.job.execution.episode_timeout_s,
            )
        except Exception as exc:
            raise EpisodeAttemptError(describe_error(exc), log.faults) from exc
        finally:
            # Frees each conversation's routing slot, so new episodes see the true replica load.
            await asyncio.gather(*(aclose_caller(getattr(callers, f.name)) for f in dataclasses.fields(callers)))
        rows = outcome_rows(outcome, attempts=attempt, code_version=self.code_version, earlier_faults=earlier_faults)
        # Encoding the files is CPU (here, where it needs no hand-over of the GIL); writing them is
        # I/O, which must not stall the other episodes' calls on a slow disk.
        encoded = encode_episode(self.sweep_dir, spec.cell.cell_id, spec.episode_id, rows)
        if self.fence is not None:
            self.fence.check()  # another driver took the sweep over and runs this episode: store nothing
        await asyncio.to_thread(store_episode, encoded)
        episode = rows["episodes"][0]
        return EpisodeSummary(
            episode_id=spec.episode_id,
            status=episode["status"],
            termination=episode["termination"],
            reward=episode["reward"],
            steps=episode["n_steps"],
            duration_s=outcome.duration_s,
        )


@ray.remote(concurrency_groups={"control": 1})  # type: ignore[call-overload]  # ray's stubs omit this actor option
class EpisodeActor:
    """Ray host of an :class:`EpisodeWorker`; ``meter`` has its own concurrency group so a busy
    actor still answers the driver's progress polls."""

    def __init__(self, job: JobConfig, sweep_dir: str, deployments: Mapping[str, Deployment], code_version: str,
                 fence: ClaimFence | None = None) -> None:
        convert_rows_without_pandas()
        self._runner = EpisodeWorker(job, Path(sweep_dir), deployments, code_version, fence)
        settle_heap()

    async def run(self, spec: EpisodeSpec, attempt: int, earlier_faults: Sequence[CallFault] = ()) -> EpisodeSummary:
        return await self._runner.run(spec, attempt, earlier_faults)

    @ray.method(concurrency_group="control")
    def meter(self) -> Meter:
        return self._runner.meter
