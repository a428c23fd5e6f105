"""EpisodeActor: a Ray actor hosting episodes, each strictly sequential inside, several at once.

One actor runs many episodes as asyncio tasks, so a remote model stays busy without a process per
episode. Each finished episode writes its own rows (atomically) and returns a small summary.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import ray
from pydantic import BaseModel, ConfigDict

from flowstate import ChatMessage, Completion, Policy
from pipeline.benchmarks import taubench
from pipeline.config import JobConfig
from pipeline.episodes import run_taubench_episode
from pipeline.llm.deployments import Deployment
from pipeline.models import EpisodeModels, aclose_policy
from pipeline.store.rows import outcome_rows
from pipeline.store.writer import write_episode
from pipeline.sweep import EpisodeSpec


class EpisodeSummary(BaseModel):
    """What the driver needs for progress and retries; the rows themselves are on disk."""

    model_config = ConfigDict(extra="forbid")

    episode_id: str
    status: str
    termination: str
    reward: float | None
    steps: int
    duration_s: float


def preload(job: JobConfig) -> None:
    """Load and verify every domain's data now: data errors show at start-up, and the first
    episode of each domain does not pay for parsing the database."""
    for bench in job.benchmarks:
        taubench.initial_db(bench.domain)
        taubench.load_tasks(bench.domain)
        taubench.tool_schemas(bench.domain)
        taubench.policy(bench.domain)
    taubench.simulation_guidelines()


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
        await aclose_policy(self.inner)


class EpisodeRunner:
    """Runs and stores episodes in this process (the actor's body; usable without Ray in tests)."""

    def __init__(self, job: JobConfig, sweep_dir: Path, deployments: Mapping[str, Deployment], code_version: str) -> None:
        self.job = job
        self.sweep_dir = Path(sweep_dir)
        self.models = EpisodeModels(job, deployments)
        self.code_version = code_version
        self.meter = Meter()
        preload(job)

    def _metered(self, policy: Policy | None) -> Policy | None:
        return None if policy is None else MeteredPolicy(policy, self.meter)

    async def run(self, spec: EpisodeSpec, attempt: int) -> EpisodeSummary:
        agent = MeteredPolicy(self.models.agent(spec), self.meter)
        user = self._metered(self.models.policy(spec.user_simulator, "user", spec))
        judge = self._metered(self.models.policy(spec.judge, "judge", spec))
        try:
            outcome = await asyncio.wait_for(
                run_taubench_episode(spec, agent, user, judge, self.job.limits),
                timeout=self.job.execution.episode_timeout_s,
            )
        finally:
            # Frees each conversation's routing slot, so new episodes see the true replica load.
            await asyncio.gather(*(aclose_policy(p) for p in (agent, user, judge)))
        rows = outcome_rows(outcome, attempts=attempt, code_version=self.code_version)
        await asyncio.to_thread(write_episode, self.sweep_dir, spec.cell.cell_id, spec.episode_id, rows)
        episode = rows["episodes"][0]
        return EpisodeSummary(
            episode_id=spec.episode_id,
            status=episode["status"],
            termination=episode["termination"],
            reward=episode["reward"],
            steps=episode["n_steps"],
            duration_s=outcome.duration_s,
        )


@ray.remote(concurrency_groups={"control": 1})
class EpisodeActor:
    """Ray host of an :class:`EpisodeRunner`; ``meter`` has its own concurrency group so a busy
    actor still answers the driver's progress polls."""

    def __init__(self, job: JobConfig, sweep_dir: str, deployments: Mapping[str, Deployment], code_version: str) -> None:
        self._runner = EpisodeRunner(job, Path(sweep_dir), deployments, code_version)

    async def run(self, spec: EpisodeSpec, attempt: int) -> EpisodeSummary:
        return await self._runner.run(spec, attempt)

    @ray.method(concurrency_group="control")
    def meter(self) -> Meter:
        return self._runner.meter
