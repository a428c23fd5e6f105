"""A job expanded into cells and episodes, each with a deterministic content-hash id.

cell    = benchmark × domain × method (with options and protocol mode) × agent model (with sampling)
episode = cell × task × trial

An episode id hashes the resolved episode config (cell, task id, trial, seed, user simulator and
judge) and the checksums of the data it reads, so re-running a job finds the episodes it already
has; the code version is recorded beside it, not hashed. The sweep id is the job's name plus a
hash of its resolved config.
"""

from __future__ import annotations

import hashlib
import json
import random
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ConfigDict

from pipeline.benchmarks import catalog
from pipeline.config import AgentModel, BenchmarkCell, JobConfig, MethodSpec, ModelUse
from pipeline.llm.deployments import DeploymentSpec, EndpointSpec, LlamaCppSpec, ScriptedSpec
from pipeline.llm.deployments.specs import SMOLLM2_FILE


def content_hash(data: Any, length: int = 16) -> str:
    """sha256 of canonical JSON (sorted keys, no whitespace): stable across runs and machines."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


class Cell(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cell_id: str
    label: str
    benchmark: BenchmarkCell
    method: MethodSpec
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


def deployment_identity(spec: DeploymentSpec) -> dict[str, Any]:
    """What identifies a deployment's behaviour: engine, model and what shapes its outputs —
    not replicas, hosts, URLs or timeouts."""
    if isinstance(spec, ScriptedSpec):
        return {"kind": spec.kind, "name": spec.name}
    if isinstance(spec, EndpointSpec):
        return {"kind": spec.kind, "engine": spec.engine, "model": spec.model}
    if isinstance(spec, LlamaCppSpec):
        model = spec.model_path.name if spec.model_path else SMOLLM2_FILE
        return {"kind": spec.kind, "model": model, "n_ctx": spec.n_ctx}
    return {"kind": spec.kind, "model": spec.model, "engine_args": spec.engine_args}


def model_identity(job: JobConfig, use: ModelUse | str) -> dict[str, Any]:
    """A model serving a role: its deployment's identity and the sampling."""
    if isinstance(use, str):
        return {"fixture": use}
    return {"model": deployment_identity(job.deployments[use.deployment]),
            "sampling": use.sampling.model_dump(mode="json")}


def trial_seeds(seed: int, trials: int) -> list[int]:
    """One seed per trial, shared by all tasks of that trial (upstream τ-bench's scheme)."""
    rng = random.Random(seed)
    return [rng.randint(0, 1_000_000) for _ in range(trials)]


def expand(job: JobConfig) -> Sweep:
    """Cells × tasks × trials, in a stable order (cells as listed, then tasks, then trials)."""
    sweep_id = f"{job.name}-{content_hash(job.to_resolved(), 10)}"
    seeds = trial_seeds(job.seed, job.trials)
    user = model_identity(job, job.user_simulator)
    judge = model_identity(job, job.judge)
    cells: list[Cell] = []
    episodes: list[EpisodeSpec] = []
    checksums: dict[str, str] = {}
    for bench in job.benchmarks:
        data = catalog.data_checksums(bench)
        checksums.update(data)
        tasks = catalog.task_ids(bench)
        for method in job.methods:
            for agent in job.agents:
                resolved = {
                    "benchmark": bench.model_dump(mode="json"),
                    "method": method.model_dump(mode="json", exclude={"label"}),
                    "agent": model_identity(job, agent),
                }
                label = ".".join((bench.benchmark, bench.domain, method.display, agent.name))
                cell = Cell(cell_id=content_hash(resolved, 12), label=label, benchmark=bench, method=method, agent=agent)
                cells.append(cell)
                for task_id in tasks:
                    for trial, seed in enumerate(seeds):
                        episode_config = {"cell": resolved, "task": task_id, "trial": trial, "seed": seed,
                                          "user_simulator": user, "judge": judge,
                                          "limits": job.limits.model_dump(mode="json"), "data": data}
                        episodes.append(EpisodeSpec(
                            episode_id=content_hash(episode_config), sweep_id=sweep_id, cell=cell, task_id=task_id,
                            trial=trial, seed=seed, user_simulator=job.user_simulator, judge=job.judge,
                        ))
    return Sweep(job=job, sweep_id=sweep_id, cells=cells, episodes=episodes, data_checksums=checksums)
