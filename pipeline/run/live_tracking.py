"""Live MLflow tracking of a running sweep, as MLflow users expect of a days-long job.

Once the sweep's models are up, its parent run opens (or, on a resume, reopens) RUNNING, starting
at the sweep's start, with the job's params, the job and the plan (``config/``: job file, resolved
job, manifest, ``plan.json``; metrics ``plan.*``), and each cell with episodes to run gets a
RUNNING child run. While episodes finish, the driver tallies what their summaries say per cell (no
query, no file read) and a background thread pushes the tallies that changed, one ``log_batch``
per run, at most every ``tracking.live_every_s`` seconds: ``live.*`` metrics at step = the cell's
episodes done so far. The runs end with the sweep: KILLED after Ctrl-C / SIGTERM (one during the
logging at its end included), FAILED after an error; a sweep that finishes is logged in full by
:mod:`pipeline.tracking.mlflow_log`, which ends them FINISHED.

MLflow is only ever called from that thread, so a slow or failing store never stops or slows the
sweep: the first failure is reported once, later pushes try again, and the logging at the end of the
sweep (or ``flowstate track``) logs everything from the Parquet files whatever the thread managed.
"""

from __future__ import annotations

import json
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.config.secrets import redact_url
from pipeline.core.commands import flowstate_command
from pipeline.run.tally import EpisodeTally
from pipeline.store.manifest import read_manifest, record_mlflow_run

if TYPE_CHECKING:  # the imports that pull in MLflow happen in the thread, not at sweep start
    from mlflow import MlflowClient

    from pipeline.core.specs import Cell, EpisodeSpec
    from pipeline.run.actors import EpisodeSummary
    from pipeline.run.plan import Plan

# The statuses a sweep's runs end with when it stops early (MLflow's names); one that finishes is
# ended FINISHED by the logging at its end.
KILLED, FAILED = "KILLED", "FAILED"
# How long the end of a sweep waits for the thread's last push (a store that hangs is left behind).
CLOSE_WAIT_S = 30.0


@dataclass(kw_only=True)
class CellTally(EpisodeTally):
    """What this run's finished episodes of one cell said, beside what earlier runs had done."""

    planned: int
    done_before: int
    steps_sum: int = 0
    seconds_sum: float = 0.0

    @property
    def done(self) -> int:
        return self.done_before + self.finished

    def add(self, summary: EpisodeSummary | None) -> None:
        super().add(summary)
        if summary is not None:
            self.steps_sum += summary.steps
            self.seconds_sum += summary.duration_s

    def metrics(self) -> dict[str, float]:
        ran = self.completed + self.grading_failed
        metrics: dict[str, float] = {"live.episodes_done": self.done, "live.episodes_planned": self.planned,
                   "live.completed": self.completed, "live.failed": self.failed, "live.ungraded": self.grading_failed}
        if self.rewarded:  # mean reward of this run's graded episodes (the SQL's pass_rate, so far)
            metrics["live.pass_rate"] = self.reward_sum / self.rewarded
        if ran:
            metrics |= {"live.mean_steps": self.steps_sum / ran, "live.mean_episode_s": self.seconds_sum / ran}
        return {k: float(v) for k, v in metrics.items()}


def sweep_metrics(tallies: list[CellTally]) -> dict[str, float]:
    """The parent's live metrics: the cells' tallies summed."""
    rewarded = sum(t.rewarded for t in tallies)
    metrics: dict[str, float] = {
        "live.episodes_done": sum(t.done for t in tallies), "live.episodes_planned": sum(t.planned for t in tallies),
        "live.completed": sum(t.completed for t in tallies), "live.failed": sum(t.failed for t in tallies),
        "live.ungraded": sum(t.grading_failed for t in tallies)}
    if rewarded:
        metrics["live.pass_rate"] = sum(t.reward_sum for t in tallies) / rewarded
    return {k: float(v) for k, v in metrics.items()}


def _cell_row(cell: Cell, sweep_id: str) -> dict[str, Any]:
    """A cell as the episodes table names it (see pipeline.run.rows.id_columns)."""
    return {"cell_id": cell.cell_id, "cell": cell.label, "sweep_id": sweep_id, "benchmark": cell.benchmark.benchmark,
            "domain": cell.benchmark.domain, "method": cell.method.display, "model": cell.agent.name}


class LiveTracking:
    """The sweep's MLflow runs while it runs; see the module docstring. The driver calls
    :meth:`start` once its models are up, :meth:`episode` as episodes finish and :meth:`close` at
    the end; none waits for MLflow (``close`` waits at most :data:`CLOSE_WAIT_S` for the last push)."""

    def __init__(self, plan: Plan, *, started_at: datetime, warn: Callable[[str], None]) -> None:
        sweep = plan.sweep
        self.sweep_dir, self.sweep_id = plan.sweep_dir, sweep.sweep_id
        self.every_s = sweep.job.tracking.live_every_s
        self.started_ms = int(started_at.timestamp() * 1000)  # a new parent starts with the sweep
        self._warn = warn
        self._cells = {cell.cell_id: _cell_row(cell, sweep.sweep_id) for cell in sweep.cells}
        self._tallies = {cell.cell_id: CellTally(planned=0, done_before=0) for cell in sweep.cells}
        for spec in sweep.episodes:
            tally = self._tallies[spec.cell.cell_id]
            tally.planned += 1
            tally.done_before += spec.episode_id in plan.done
        self._to_run = {spec.cell.cell_id for spec in plan.todo}
        self._lock = threading.Lock()
        self._changed: set[str] = set()  # cells with news since the last push
        self._deployments: dict[str, Any] = {}  # learnt while running, logged as params
        self._parent_params: set[str] = set()  # those the parent has (MLflow params cannot change)
        self._stop = threading.Event()
        self._end_status: str | None = None
        self._abandoned = False
        self._warned = False
        self.failed_pushes = 0  # pushes the store refused (warned about once)
        self.parent_id: str | None = None
        self._children: dict[str, str] = {}  # cell id -> run id, the runs this sweep reopened or made
        self._client: MlflowClient | None = None
        self._thread = self._new_thread()

    # -- the driver's side: cheap, never touches MLflow ------------------------------------------
    def episode(self, spec: EpisodeSpec, summary: EpisodeSummary | None) -> None:
        """An episode finished (``None``: recorded as an infrastructure failure)."""
        cell = spec.cell.cell_id
        with self._lock:
            self._tallies[cell].add(summary)
            self._changed.add(cell)

    def start(self, deployments: dict[str, Any]) -> None:
        """The models are up (their descriptions become params): open the runs now, not while Ray
        and the servers start, so that MLflow (a new store's migrations, say) never competes with
        their start-up."""
        with self._lock:
            self._deployments = dict(deployments)
        self._thread.start()

    def close(self, end_status: str | None = None) -> None:
        """Push what is left and stop; ``end_status`` (:data:`KILLED`, :data:`FAILED`) ends the runs,
        None leaves them RUNNING for the logging at the end of the sweep (if that logging is stopped,
        closing again with an end status ends them). Remembers the parent in the manifest. A sweep
        that failed before its models were up opens its runs here, to end them."""
        self._end_status = end_status
        self._stop.set()
        if self._thread.ident is not None and not self._thread.is_alive() and end_status is not None:
            self._thread = self._new_thread()  # closed before: one more pass, to end the runs
        if self._thread.ident is None:
            if end_status is None:
                return
            self._thread.start()
        self._thread.join(CLOSE_WAIT_S)
        if self._thread.is_alive():
            self._warn_once(f"MLflow did not answer within {CLOSE_WAIT_S:.0f} s; going on without it")
        if self.parent_id is not None:
            record_mlflow_run(self.sweep_dir, self.parent_id)

    def abandon(self) -> None:
        """Another driver took the sweep over: stop without a last push, leaving the runs (they are
        the new driver's now) and the manifest alone."""
        self._abandoned = True
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(CLOSE_WAIT_S)

    # -- the thread ---------------------------------------------------------------------------------
    def _new_thread(self) -> threading.Thread:
        return threading.Thread(target=self._run, name="flowstate-mlflow-live", daemon=True)

    def _run(self) -> None:
        while True:
            stopping = self._stop.is_set()
            if self._abandoned:
                return
            try:
                client = self._client = self._client or self._open()
                self._push(client)
                if stopping and self._end_status is not None:
                    self._end(client, self._end_status)
            except Exception as exc:  # noqa: BLE001 - a store that fails must not stop the sweep
                self.failed_pushes += 1
                error = redact_url(str(exc))  # MLflow's errors name the store's URL, a password in it included
                self._warn_once(f"MLflow live tracking failed ({type(exc).__name__}: {error}); the sweep goes on, "
                                f"and its results are logged in full at its end or by `{flowstate_command('track')}`")
            if stopping:
                return
            self._stop.wait(self.every_s)

    def _warn_once(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            self._warn(message)

    def _open(self) -> MlflowClient:
        """The parent (found again, or new at the sweep's start time) RUNNING with params, tags, the
        job and the plan; a RUNNING child for every cell with episodes to run."""
        from pipeline.tracking import mlflow_runs as runs

        manifest = read_manifest(self.sweep_dir) or {}
        where = runs.target(manifest, self.sweep_dir.name)
        client = runs.open_client(where.tracking_uri)
        experiment = runs.experiment_id(client, where.experiment)
        parent = (runs.find_parent(client, experiment, self.sweep_id, manifest.get("mlflow_run_id"))
                  or runs.new_parent(client, experiment, self.sweep_id, self.started_ms))
        runs.reopen(client, parent)
        parent_id = parent.info.run_id
        client.set_tag(parent_id, "flowstate.parquet_path", str(self.sweep_dir.resolve()))
        with self._lock:
            planned = [(cell, t.planned, t.done_before) for cell, t in zip(self._cells.values(), self._tallies.values(),
                                                                          strict=True)]
        done = sum(d for _, _, d in planned)
        metrics = {"plan.cells": len(planned), "plan.episodes": sum(p for _, p, _ in planned),
                   "plan.episodes_done": done, "plan.episodes_to_run": sum(p - d for _, p, d in planned)}
        params = runs.sweep_params(manifest)
        runs.log_new(client, parent, params, {k: float(v) for k, v in metrics.items()}, step=done)
        self._parent_params = set(parent.data.params) | set(params)
        with tempfile.TemporaryDirectory(prefix="flowstate-mlflow-") as tmp:
            folder = Path(tmp)
            runs.write_config(folder, self.sweep_dir, manifest)
            (folder / "plan.json").write_text(json.dumps(
                [{**cell, "episodes": p, "done": d, "to_run": p - d} for cell, p, d in planned], indent=2))
            client.log_artifacts(parent_id, str(folder), artifact_path="config")
        existing = runs.child_runs(client, experiment, parent_id)
        for cell_id in sorted(self._to_run):
            cell = self._cells[cell_id]
            child = runs.child_run(client, experiment, parent_id, cell, existing)
            runs.reopen(client, child)
            runs.log_dataset(client, child, cell, manifest)
            runs.log_new(client, child, runs.cell_params(cell), {}, step=0)
            self._children[cell_id] = child.info.run_id
        self.parent_id = parent_id
        return client

    def _push(self, client: MlflowClient) -> None:
        """The tallies that changed since the last push, one batch per run; on failure they stay
        owed to the next push."""
        from mlflow.entities import Param

        from pipeline.tracking import mlflow_runs as runs

        assert self.parent_id is not None
        with self._lock:
            changed, self._changed = self._changed, set()
            params = {k: v for k, v in runs.flat_params("deployment", self._deployments).items()
                      if k not in self._parent_params}
            cells = {cell: (self._tallies[cell].metrics(), self._tallies[cell].done) for cell in changed}
            totals = sweep_metrics(list(self._tallies.values()))
        try:
            for cell, (metrics, done) in sorted(cells.items()):
                runs.log_batch(client, self._children[cell], metrics, step=done)
            if changed or params:
                runs.log_batch(client, self.parent_id, totals if changed else {},
                               step=int(totals["live.episodes_done"]), params=[Param(k, v) for k, v in params.items()])
        except Exception:
            with self._lock:
                self._changed |= changed
            raise
        self._parent_params |= set(params)

    def _end(self, client: MlflowClient, status: str) -> None:
        from pipeline.tracking import mlflow_runs as runs

        assert self.parent_id is not None
        ended = runs.now_ms()
        for run_id in self._children.values():
            client.set_terminated(run_id, status, end_time=ended)
        client.set_terminated(self.parent_id, status, end_time=ended)
