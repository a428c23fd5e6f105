"""EpisodeActor: a Ray actor hosting episodes, each strictly sequential inside, several at once.

One actor runs many episodes as asyncio tasks, so a remote model stays busy without a process per
episode. Each finished episode writes its own rows (atomically) and returns a small summary.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

import ray
from pydantic import BaseModel, ConfigDict

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
    agent_tokens: int
    total_tokens: int
    model_calls: int
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


class EpisodeRunner:
    """Runs and stores episodes in this process (the actor's body; usable without Ray in tests)."""

    def __init__(self, job: JobConfig, sweep_dir: Path, deployments: Mapping[str, Deployment], code_version: str) -> None:
        self.job = job
        self.sweep_dir = Path(sweep_dir)
        self.models = EpisodeModels(job, deployments)
        self.code_version = code_version
        preload(job)

    async def run(self, spec: EpisodeSpec, attempt: int) -> EpisodeSummary:
        agent = self.models.agent(spec)
        user = self.models.policy(spec.user_simulator, "user", spec)
        judge = self.models.policy(spec.judge, "judge", spec)
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
        messages = rows["messages"]
        return EpisodeSummary(
            episode_id=spec.episode_id,
            status=episode["status"],
            termination=episode["termination"],
            reward=episode["reward"],
            agent_tokens=(episode["agent_prompt_tokens"] or 0) + (episode["agent_completion_tokens"] or 0),
            total_tokens=sum((m["prompt_tokens"] or 0) + (m["completion_tokens"] or 0) for m in messages),
            model_calls=len(messages),
            steps=episode["n_steps"],
            duration_s=outcome.duration_s,
        )


@ray.remote(concurrency_groups={"control": 1})
class EpisodeActor:
    """Ray host of an :class:`EpisodeRunner`; ``ping`` has its own concurrency group so a full
    actor still answers health checks."""

    def __init__(self, job: JobConfig, sweep_dir: str, deployments: Mapping[str, Deployment], code_version: str) -> None:
        self._runner = EpisodeRunner(job, Path(sweep_dir), deployments, code_version)

    async def run(self, spec: EpisodeSpec, attempt: int) -> EpisodeSummary:
        return await self._runner.run(spec, attempt)

    @ray.method(concurrency_group="control")
    def ping(self) -> bool:
        return True
