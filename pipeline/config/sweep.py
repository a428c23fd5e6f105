"""A job expanded into cells and episodes, each with a deterministic content-hash id.

cell    = benchmark × domain × method (with options and protocol mode) × agent model (with sampling)
episode = cell × task × trial

An episode id hashes the resolved episode config (cell, task id, trial, seed, the models of its other
roles) and the checksums of the data it reads, so re-running a job finds the episodes it already
has; the code version is recorded beside it, not hashed. The sweep id is the job's name plus a
hash of its resolved config.

A sweep of a million episodes is planned in seconds: a cell's episode configs differ only in task,
trial and seed, so each id is the hash of the cell's canonical JSON with those three values spliced
in (:class:`EpisodeIds`), and the episodes are held as their ids, each :class:`EpisodeSpec` built
when it is used (:class:`Episodes`).
"""

from __future__ import annotations

import hashlib
import operator
import random
from array import array
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterator, Sequence, Set
from dataclasses import dataclass
from functools import cached_property
from itertools import chain, compress
from typing import Any, overload

from pydantic import BaseModel, ConfigDict

from flowstate import METHODS, Capability, MethodOptions
from flowstate.errors import FlowStateError
from pipeline.benchmarks.base import benchmark_of
from pipeline.config.job import JobConfig
from pipeline.config.secrets import Secrets
from pipeline.core.ids import canonical_json, content_hash
from pipeline.core.specs import AgentModel, BenchmarkCell, Cell, EmbeddingsUse, EpisodeSpec, ModelUse


class SweepError(FlowStateError, ValueError):
    """A job that loads but does not make a sweep: episodes that are not distinct, or too many."""


# What varies between the episodes of one cell; everything else in an episode config is the cell's.
# Sorted, as canonical JSON writes them.
EPISODE_KEYS = ("seed", "task", "trial")


class EpisodeIds:
    """The ids of one cell's episodes: ``content_hash`` of each episode config, byte for byte.

    The cell's canonical JSON is cut where the seed, the task and the trial go (sorted keys keep
    every key in its place whatever the values), so an id costs one short hash, resumed from the
    digest of the text up to the task, instead of a dict, a sort and a dump.
    """

    def __init__(self, cell_config: dict[str, Any]) -> None:
        self._config = cell_config
        marks = {key: f"\x00{key}\x00" for key in EPISODE_KEYS}
        text = canonical_json({**cell_config, **marks})
        cuts = [canonical_json(mark) for mark in marks.values()]
        # None: a value of the cell spells a mark, so the text cannot be cut; each config is hashed whole.
        self._pieces: list[str] | None = None
        if all(text.count(cut) == 1 for cut in cuts):
            head, rest = text.split(cuts[0])
            middle, rest = rest.split(cuts[1])
            self._pieces = [head, middle, *rest.split(cuts[2])]

    def ids(self, tasks: Sequence[str], seeds: Sequence[int]) -> list[str]:
        """Every task × trial (trial ``i`` with seed ``seeds[i]``), tasks outer: the sweep's order."""
        if self._pieces is None:
            return [content_hash({**self._config, "seed": seed, "task": task, "trial": trial})
                    for task in tasks for trial, seed in enumerate(seeds)]
        head, middle, before_trial, tail = (piece.encode() for piece in self._pieces)
        trials = []  # per trial: the digest up to the task, and the text after it
        for trial, seed in enumerate(seeds):
            upto_task = hashlib.sha256(head + canonical_json(seed).encode() + middle)
            trials.append((upto_task, before_trial + canonical_json(trial).encode() + tail))
        out: list[str] = []
        for task in tasks:
            encoded = canonical_json(task).encode()
            for upto_task, after_task in trials:
                digest = upto_task.copy()
                digest.update(encoded + after_task)
                out.append(digest.hexdigest()[:16])
        return out


@dataclass(frozen=True)
class CellEpisodes:
    """One cell's episodes: its tasks × trials in sweep order, by id."""

    cell: Cell
    tasks: tuple[str, ...]
    seeds: tuple[int, ...]
    ids: list[str]


class Episodes(Sequence[EpisodeSpec]):
    """A sweep's episodes (or some of them) in sweep order, held as ids: each :class:`EpisodeSpec`
    is built when it is read, so a million episodes take their ids' memory, not a million models."""

    def __init__(self, cells: Sequence[CellEpisodes], roles: dict[str, Any],
                 positions: Sequence[int] | None = None) -> None:
        self._cells = tuple(cells)
        self._roles = roles  # sweep_id and the job's role settings, shared by every spec
        self._starts = list(chain([0], _running_sum(len(c.ids) for c in self._cells)))
        self._whole = positions is None
        # Indices into the whole sweep.
        self._positions: Sequence[int] = range(self._starts[-1]) if positions is None else positions

    def __len__(self) -> int:
        return len(self._positions)

    @overload
    def __getitem__(self, index: int) -> EpisodeSpec: ...
    @overload
    def __getitem__(self, index: slice) -> Episodes: ...
    def __getitem__(self, index: int | slice) -> EpisodeSpec | Episodes:
        if isinstance(index, slice):
            return self._subset(self._positions[index])
        return self._spec(self._positions[index])

    def __iter__(self) -> Iterator[EpisodeSpec]:
        return map(self._spec, self._positions)

    def ids(self) -> Iterator[str]:
        """The episode ids in order, without building any spec."""
        if self._whole:
            return chain.from_iterable(c.ids for c in self._cells)
        return map(self._id, self._positions)

    def without(self, ids: Set[str]) -> Episodes:
        """These episodes but those in ``ids`` (e.g. the ones already done)."""
        kept = map(operator.not_, map(ids.__contains__, self.ids()))  # C loops: a million ids in a tenth of a second
        return self._subset(array("q", compress(self._positions, kept)))

    def of_cell(self, cell_id: str) -> Episodes:
        """These episodes of one cell."""
        index = next(i for i, c in enumerate(self._cells) if c.cell.cell_id == cell_id)
        start, end = self._starts[index], self._starts[index + 1]
        if self._whole:
            return self._subset(range(start, end))
        return self._subset(array("q", (p for p in self._positions if start <= p < end)))

    def _subset(self, positions: Sequence[int]) -> Episodes:
        return Episodes(self._cells, self._roles, positions)

    def _locate(self, position: int) -> tuple[CellEpisodes, int]:
        index = bisect_right(self._starts, position) - 1
        return self._cells[index], position - self._starts[index]

    def _id(self, position: int) -> str:
        cell, offset = self._locate(position)
        return cell.ids[offset]

    def _spec(self, position: int) -> EpisodeSpec:
        cell, offset = self._locate(position)
        task, trial = divmod(offset, len(cell.seeds))
        return EpisodeSpec(episode_id=cell.ids[offset], cell=cell.cell, task_id=cell.tasks[task], trial=trial,
                           seed=cell.seeds[trial], **self._roles)


def _running_sum(values: Iterator[int]) -> Iterator[int]:
    total = 0
    for value in values:
        total += value
        yield total


class Sweep(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    job: JobConfig
    sweep_id: str
    cells: list[Cell]
    episodes: Episodes
    data_checksums: dict[str, str]

    @cached_property
    def by_id(self) -> dict[str, EpisodeSpec]:
        """Every spec by id (builds them all: for fixtures and tests of small sweeps)."""
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
    """Cells × tasks × trials, in a stable order (cells as listed, then tasks, then trials), after
    checking that every episode is distinct and that there are not too many (:class:`SweepError`)."""
    secrets = job.secrets()
    _check_distinct_cells(job, secrets)
    tasks_of = [tuple(benchmark_of(bench).task_ids(bench)) for bench in job.benchmarks]
    _check_episodes(job, tasks_of)
    sweep_id = f"{job.name}-{content_hash(job.to_resolved(), 10)}"
    seeds = tuple(trial_seeds(job.seed, job.trials))
    user = model_identity(job, job.user_simulator, secrets)
    judge = model_identity(job, job.judge, secrets)
    limits = job.limits.model_dump(mode="json")
    # Roles added after the first schema enter episode ids only when set (older ids stay the same).
    tool_model = {"tool_model": model_identity(job, job.tool_model, secrets)} if job.tool_model is not None else {}
    cells: list[CellEpisodes] = []
    checksums: dict[str, str] = {}
    for bench, tasks in zip(job.benchmarks, tasks_of, strict=True):
        data = benchmark_of(bench).data_checksums(bench)
        checksums.update(data)
        for method in job.methods:
            roles = {**tool_model, **_method_roles(job, method, secrets)}
            for agent in job.agents:
                cell, resolved = _cell(job, bench, method, agent, secrets)
                ids = EpisodeIds({"cell": resolved, "user_simulator": user, "judge": judge, **roles,
                                  "limits": limits, "data": data})
                cells.append(CellEpisodes(cell, tasks, seeds, ids.ids(tasks, seeds)))
    episodes = Episodes(cells, {"sweep_id": sweep_id, "user_simulator": job.user_simulator, "judge": job.judge,
                                "tool_model": job.tool_model, "memory": job.memory, "embeddings": job.embeddings})
    return Sweep(job=job, sweep_id=sweep_id, cells=[c.cell for c in cells], episodes=episodes, data_checksums=checksums)


def _check_distinct_cells(job: JobConfig, secrets: Secrets) -> None:
    """Two benchmarks, methods or agents that differ only in names (labels, deployments' names) make
    the same cells: identical episodes under the same ids, of which one result would be kept."""
    entries = {
        "benchmarks": [(b.domain, secrets.redact(b.identity())) for b in job.benchmarks],
        "methods": [(m.display, secrets.redact(m.identity())) for m in job.methods],
        "agents": [(a.name, model_identity(job, a, secrets)) for a in job.agents],
    }
    for key, listed in entries.items():
        first: dict[str, int] = {}
        for i, (label, identity) in enumerate(listed):
            j = first.setdefault(canonical_json(identity), i)
            if j != i:
                raise SweepError(f"{key}[{j}] ({listed[j][0]!r}) and {key}[{i}] ({label!r}) make the same cells (only "
                                 "their names differ), so their episodes would be identical, under the same ids: list "
                                 "it once (for repeat runs raise trials:, each trial has its own seed)")


def _check_episodes(job: JobConfig, tasks_of: list[tuple[str, ...]]) -> None:
    """Each task once per benchmark (else one episode id would run twice at once, into the same files),
    and at most ``execution.max_episodes`` episodes, counted before any is made."""
    for i, tasks in enumerate(tasks_of):
        if len(set(tasks)) != len(tasks):
            twice = next(task for task, n in Counter(tasks).items() if n > 1)
            raise SweepError(f"benchmarks[{i}].tasks: task {twice!r} is listed more than once: its episodes would run "
                             "twice at once into the same files (for repeat runs raise trials:)")
    n_tasks, per_task = sum(map(len, tasks_of)), len(job.methods) * len(job.agents) * job.trials
    limit = job.execution.max_episodes
    if n_tasks * per_task > limit:
        raise SweepError(f"trials: {job.trials:,} × {n_tasks:,} tasks × {len(job.methods)} methods × {len(job.agents)} "
                         f"agents = {n_tasks * per_task:,} episodes, beyond the {limit:,} a job may have: lower trials or "
                         "tasks, or raise execution.max_episodes")
