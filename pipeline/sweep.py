"""A job expanded into cells and episodes, each with a deterministic content-hash id.

cell    = benchmark × domain × method (with options and protocol mode) × agent model (with sampling)
episode = cell × task × trial

An episode id hashes the resolved episode config (cell, task id, trial, seed, the models of its other
roles) and the checksums of the data it reads, so re-running a job finds the episodes it already
has; the code version is recorded beside it, not hashed. The sweep id is the job's name plus a
hash of its resolved config.
"""

from __future__ import annotations

import hashlib
import json
import random
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ConfigDict, SerializeAsAny

from flowstate import METHODS, Capability, MethodOptions
from pipeline.benchmarks.plugin import BenchmarkCell, benchmark_of
from pipeline.config import AgentModel, EmbeddingsUse, JobConfig, ModelUse
from pipeline.redaction import Secrets


def content_hash(data: Any, length: int = 16) -> str:
    """sha256 of canonical JSON (sorted keys, no whitespace): stable across runs and machines."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


class Cell(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cell_id: str
    label: str
    benchmark: SerializeAsAny[BenchmarkCell]
    method: SerializeAsAny[MethodOptions]
    agent: AgentModel

    @property
    def domain(self) -> str:
        return self.benchmark.domain


class EpisodeSpec(BaseModel):
    """Everything an actor needs to run one episode (besides the job's deployments)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    episode_id: str
    sweep_id: str
    cell: Cell
    task_id: str
    trial: int
    seed: int
    user_simulator: ModelUse | str
    judge: ModelUse | str
    # Unset roles fall back to the cell's agent model (see JobConfig).
    tool_model: ModelUse | None = None
    memory: ModelUse | None = None
    embeddings: EmbeddingsUse | None = None


class Sweep(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    job: JobConfig
    sweep_id: str
    cells: list[Cell]
    episodes: list[EpisodeSpec]
    data_checksums: dict[str, str]

    @cached_property
    def by_id(self) -> dict[str, EpisodeSpec]:
        return {e.episode_id: e for e in self.episodes}


def model_identity(job: JobConfig, use: ModelUse | EmbeddingsUse | str, secrets: Secrets) -> dict[str, Any]:
    """A model serving a role: its deployment's identity and the sampling (fixtures: their name).
    Secrets are redacted here and in :func:`_cell`, where identities are made: no id hashes one."""
    if isinstance(use, str):
        return {"fixture": use}
    model = secrets.redact(job.deployments[use.deployment].identity())
    if isinstance(use, EmbeddingsUse):
        return {"model": model}
    return {"model": model, "sampling": use.sampling.model_dump(mode="json")}


def _method_roles(job: JobConfig, method: MethodOptions, secrets: Secrets) -> dict[str, Any]:
    """The identity of the roles a method calls that the job sets apart from the agent."""
    uses = METHODS.get(method.name).uses(method)
    roles: dict[str, Any] = {}
    if Capability.MEMORY_MODEL in uses and job.memory is not None:
        roles["memory"] = model_identity(job, job.memory, secrets)
    if Capability.EMBEDDINGS in uses and job.embeddings is not None:
        roles["embeddings"] = model_identity(job, job.embeddings, secrets)
    return roles


def trial_seeds(seed: int, trials: int) -> list[int]:
    """One seed per trial, shared by all tasks of that trial (upstream τ-bench's scheme)."""
    rng = random.Random(seed)
    return [rng.randint(0, 1_000_000) for _ in range(trials)]


def _cell(job: JobConfig, bench: BenchmarkCell, method: MethodOptions, agent: AgentModel,
          secrets: Secrets) -> tuple[Cell, dict[str, Any]]:
    resolved = {
        "benchmark": secrets.redact(bench.identity()),
        "method": secrets.redact(method.identity()),
        "agent": model_identity(job, agent, secrets),
    }
    label = ".".join((bench.benchmark, bench.domain, method.display, agent.name))
    return Cell(cell_id=content_hash(resolved, 12), label=label, benchmark=bench, method=method, agent=agent), resolved


def job_cells(job: JobConfig) -> list[Cell]:
    """The job's cells in sweep order, without reading any data (e.g. to interpret stored rows)."""
    secrets = job.secrets()
    return [_cell(job, b, m, a, secrets)[0] for b in job.benchmarks for m in job.methods for a in job.agents]


def expand(job: JobConfig) -> Sweep:
    """Cells × tasks × trials, in a stable order (cells as listed, then tasks, then trials)."""
    sweep_id = f"{job.name}-{content_hash(job.to_resolved(), 10)}"
    seeds = trial_seeds(job.seed, job.trials)
    secrets = job.secrets()
    user = model_identity(job, job.user_simulator, secrets)
    judge = model_identity(job, job.judge, secrets)
    # Roles added after the first schema enter episode ids only when set (older ids stay the same).
    tool_model = {"tool_model": model_identity(job, job.tool_model, secrets)} if job.tool_model is not None else {}
    cells: list[Cell] = []
    episodes: list[EpisodeSpec] = []
    checksums: dict[str, str] = {}
    for bench in job.benchmarks:
        benchmark = benchmark_of(bench)
        data = benchmark.data_checksums(bench)
        checksums.update(data)
        tasks = benchmark.task_ids(bench)
        for method in job.methods:
            roles = {**tool_model, **_method_roles(job, method, secrets)}
            for agent in job.agents:
                cell, resolved = _cell(job, bench, method, agent, secrets)
                cells.append(cell)
                for task_id in tasks:
                    for trial, seed in enumerate(seeds):
                        episode_config = {"cell": resolved, "task": task_id, "trial": trial, "seed": seed,
                                          "user_simulator": user, "judge": judge, **roles,
                                          "limits": job.limits.model_dump(mode="json"), "data": data}
                        episodes.append(EpisodeSpec(
                            episode_id=content_hash(episode_config), sweep_id=sweep_id, cell=cell, task_id=task_id,
                            trial=trial, seed=seed, user_simulator=job.user_simulator, judge=job.judge,
                            tool_model=job.tool_model, memory=job.memory, embeddings=job.embeddings,
                        ))
    return Sweep(job=job, sweep_id=sweep_id, cells=cells, episodes=episodes, data_checksums=checksums)
