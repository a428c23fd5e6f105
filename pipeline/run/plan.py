"""Phase 1 of ``flowstate run``: from a job file to the episodes still to run.

Load and validate the job, expand it into cells and episodes with their content-hash ids, find the
sweep's directory and what it already holds (resume), and, for a dry run, estimate the rest.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict
from rich.table import Table

from pipeline.config.job import NOT_RESULTS, load_job
from pipeline.config.sweep import Episodes, Sweep, SweepError, expand
from pipeline.config.yaml_loader import ConfigError
from pipeline.run.estimate import estimate
from pipeline.store.files import REPLACED_MARK
from pipeline.store.manifest import ManifestError, read_manifest
from pipeline.store.reader import finished_episodes


class Plan(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    job_path: Path
    sweep: Sweep
    sweep_dir: Path
    done: frozenset[str]
    # Episodes recorded as infrastructure failures by an earlier run: run again (see todo).
    retry: frozenset[str] = frozenset()
    # Where --fresh moved earlier results of this sweep (None when nothing was moved).
    moved_aside: Path | None = None

    @cached_property
    def todo(self) -> Episodes:
        """The episodes not done, in sweep order (held as ids; each spec is built when it is dispatched)."""
        return self.sweep.episodes.without(self.done)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Plan:
        """A copy whose ``todo`` follows its own ``done`` (pydantic copies a cached value along)."""
        copy = super().model_copy(update=update, deep=deep)
        copy.__dict__.pop("todo", None)
        return copy


def locate_sweep(job_path: Path, *, out: Path | None = None) -> tuple[Sweep, Path]:
    """The sweep of a job file and its directory."""
    job = load_job(job_path)
    try:
        sweep = expand(job)
    except SweepError as exc:
        raise ConfigError(f"{job_path}: {exc}") from None
    return sweep, (out or sweep.job.output_dir) / sweep.sweep_id


def plan_sweep(job_path: Path, *, out: Path | None = None, fresh: bool = False,
               located: tuple[Sweep, Path] | None = None) -> Plan:
    """The sweep of a job file (``located`` when known), and which of its episodes are already done
    in its directory."""
    sweep, sweep_dir = located or locate_sweep(job_path, out=out)
    moved = _move_aside(sweep_dir) if fresh and sweep_dir.exists() else None
    finished = finished_episodes(sweep_dir)
    return Plan(job_path=job_path, sweep=sweep, sweep_dir=sweep_dir, done=finished.done, retry=finished.failed,
                moved_aside=moved)


def earlier_sweeps(sweep: Sweep, sweep_dir: Path) -> dict[Path, list[str]]:
    """Other sweeps of the same job name beside ``sweep_dir``, each with what differs in this one
    (the job's fields that define results, the data files): why this sweep has a new id."""
    if not sweep_dir.parent.is_dir():
        return {}
    now = sweep.job.to_resolved()
    found: dict[Path, list[str]] = {}
    for other in sorted(sweep_dir.parent.iterdir()):
        if not other.is_dir() or other == sweep_dir or REPLACED_MARK in other.name:
            continue
        try:
            manifest = read_manifest(other)
        except ManifestError:
            continue  # not this run's concern
        if not manifest or manifest.get("job_name") != sweep.job.name:
            continue
        then = manifest.get("job") or {}
        keys = (set(now) | set(then)) - NOT_RESULTS - {"name"}
        fields = [k for k in sorted(keys) if now.get(k) != then.get(k)]
        old_data = manifest.get("data_checksums") or {}
        data = sorted(f for f in set(old_data) | set(sweep.data_checksums) if old_data.get(f) != sweep.data_checksums.get(f))
        found[other] = fields + [f"data file {f}" for f in data]
    return found


def plan_table(plan: Plan) -> Table:
    """The dry run's table: per cell, episodes done and to run, estimated model calls and tokens."""
    sweep, done = plan.sweep, plan.done
    table = Table(title=f"sweep {sweep.sweep_id} (dry run: nothing started)")
    for column in ("cell", "episodes", "done", "to run", "model calls (est.)", "tokens (est.)", "estimate from"):
        table.add_column(column, justify="left" if column in ("cell", "estimate from") else "right")
    total_calls = total_tokens = 0.0
    for e in estimate(sweep, plan.sweep_dir, done):
        total_calls += e.model_calls
        total_tokens += e.tokens
        table.add_row(e.cell, str(e.episodes), str(e.done), str(e.episodes - e.done), f"{e.model_calls:,.0f}",
                      f"{e.tokens:,.0f}", e.source)
    todo = len(plan.todo)
    table.add_row("total", str(len(sweep.episodes)), str(len(sweep.episodes) - todo), str(todo),
                  f"{total_calls:,.0f}", f"{total_tokens:,.0f}", "", style="bold")
    return table


def _move_aside(sweep_dir: Path) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    target = sweep_dir.with_name(f"{sweep_dir.name}.replaced-{stamp}")
    shutil.move(str(sweep_dir), target)
    return target
