"""``flowstate run``: plan the sweep, dispatch its episodes, finish it — read top down.

1. :mod:`pipeline.run.plan`: load the job, expand it, find what is already done (resume);
2. :mod:`pipeline.run.dispatch`: start the models, run the rest on Ray actors with live progress;
3. :mod:`pipeline.run.finish`: compact the files and log the sweep to MLflow.

The manifest (:mod:`pipeline.store.manifest`) is written after each phase, so an interrupted sweep says
what it was and how far it got.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from rich.console import Console

from pipeline.core.commands import flowstate_command
from pipeline.core.disk_full import storage_errors
from pipeline.run.dispatch import Progress, dispatch
from pipeline.run.finish import finish_sweep
from pipeline.run.live_tracking import FAILED, KILLED, LiveTracking
from pipeline.run.manifest import write_manifest
from pipeline.run.plan import Plan, earlier_sweeps, locate_sweep, plan_sweep, plan_table
from pipeline.store.claim import ClaimLostError, SweepClaim, claim_sweep
from pipeline.store.compact import forget_episodes
from pipeline.store.inventory import QUARANTINE
from pipeline.store.manifest import check_manifest_belongs
from pipeline.store.output_paths import output_folder
from pipeline.store.verify import finish_pending_repair, repair, verify_sweep
from pipeline.store.writer import remove_orphan_temporaries


class SweepResult(BaseModel):
    sweep_id: str
    sweep_dir: Path
    episodes: int
    skipped: int
    completed: int
    failed: int
    grading_failed: int
    interrupted: bool
    duration_s: float
    mlflow_run_id: str | None = None
    tracking_uri: str | None = None
    finish_errors: list[str] = []


def run_sweep(job_path: Path, *, out: Path | None = None, address: str | None = None, fresh: bool = False,
              dry_run: bool = False, wait: bool = False, console: Console | None = None) -> SweepResult | None:
    """Run (or resume) the sweep of a job file; ``None`` for a dry run. The sweep is claimed for the
    whole run (:mod:`pipeline.store.claim`): a second driver refuses at once, or waits (``wait``). A write
    the disk refuses stops it with a :class:`~pipeline.core.disk_full.StorageError`."""
    console = console or Console()
    located = locate_sweep(job_path, out=out)
    output_folder(located[1].parent, "--out" if out is not None else f"{job_path}: output_dir", make=not dry_run)
    if dry_run:
        console.print(plan_table(plan_sweep(job_path, located=located)))
        return None
    if not located[1].exists():
        for other, changes in earlier_sweeps(*located).items():
            console.print(f"the job differs from its earlier sweep {other.name} ({', '.join(changes) or 'code version'}): "
                          f"this is a new sweep, {located[0].sweep_id}; the earlier results stay in {other}")
    with storage_errors(), claim_sweep(located[1], "run", wait=wait, on_wait=lambda holder: console.print(
            f"waiting for the sweep's other driver: {holder.describe()}")) as claim:
        if located[1].exists() and not fresh:
            check_manifest_belongs(located[1], located[0].sweep_id)
            _quarantine_bad_files(located[1], console)
        return _run_claimed(plan_sweep(job_path, fresh=fresh, located=located), job_path, address, console, claim)


def _dispatch_live(plan: Plan, job_path: Path, address: str | None, console: Console, live: LiveTracking | None,
                   claim: SweepClaim) -> tuple[Progress, bool]:
    """Dispatch, with the sweep's MLflow runs live while episodes run (:mod:`pipeline.run.live_tracking`):
    they end KILLED when the user stops the sweep, FAILED when it raises, and stay RUNNING until
    the sweep is logged in full at its end, or for the driver that took the claim over. Nothing to
    run (``live`` None): MLflow is not touched (nor imported)."""
    def started(deployments: dict[str, Any]) -> None:
        write_manifest(plan.sweep, plan.sweep_dir, job_path=job_path, deployments=deployments)
        if live is not None:
            live.start(deployments)

    try:
        progress, interrupted = dispatch(plan, address=address, console=console, on_started=started,
                                         on_episode=live.episode if live is not None else lambda spec, summary: None,
                                         claim=claim)
        claim.check()  # the sweep is still this driver's to record and finish
    except ClaimLostError:
        if live is not None:
            live.abandon()
        raise
    except BaseException as exc:
        if live is not None:
            live.close(KILLED if isinstance(exc, KeyboardInterrupt) else FAILED)
        raise
    if live is not None:
        live.close(KILLED if interrupted else None)
    return progress, interrupted


def _quarantine_bad_files(sweep_dir: Path, console: Console) -> None:
    """Before resuming: a repair cut short finished, orphan rows dropped, bad or missing files out
    of the way and their episodes to run again. Files are checked by size, footer and record, not
    hashed (``flowstate verify`` hashes every byte)."""
    finish_pending_repair(sweep_dir)
    remove_orphan_temporaries(sweep_dir)  # writes an earlier run's killed processes cut short
    verification = verify_sweep(sweep_dir, thorough=False)
    if verification.problems:
        moved = repair(sweep_dir, verification)
        for problem in verification.problems:
            console.print(f"[red]bad file[/red] {problem.describe()}")
        console.print(f"moved {len(moved)} bad files to {sweep_dir / QUARANTINE}; running their "
                      f"{len(verification.bad_episodes)} episodes again")


def _run_claimed(plan: Plan, job_path: Path, address: str | None, console: Console, claim: SweepClaim) -> SweepResult:
    if plan.moved_aside is not None:
        console.print(f"--fresh: moved the earlier results to {plan.moved_aside}")
    if plan.retry:
        forget_episodes(plan.sweep_dir, plan.retry)  # their new rows, not the failures, are what readers see
        console.print(f"retrying {len(plan.retry)} episodes recorded as infrastructure failures by an earlier run")
    sweep, sweep_dir = plan.sweep, plan.sweep_dir
    if sweep.job.analysis.count_tokens and plan.todo:  # a tokenizer that cannot load fails here, not per episode
        from pipeline.llm.counting import chat_tokenizer

        chat_tokenizer(sweep.job.analysis.count_tokens)
    console.print(f"sweep {sweep.sweep_id}: {len(sweep.cells)} cells, {len(sweep.episodes)} episodes, "
                  f"{len(plan.done)} already done, {len(plan.todo)} to run -> {sweep_dir}")
    started_at = datetime.now(UTC)
    changes = bool(plan.todo or plan.retry)
    write_manifest(sweep, sweep_dir, job_path=job_path, unfinished=changes)
    live = LiveTracking(plan, started_at=started_at, warn=lambda message: console.print(f"[yellow]{message}[/yellow]")
                        ) if plan.todo else None
    progress, interrupted = _dispatch_live(plan, job_path, address, console, live, claim)
    result = SweepResult(
        sweep_id=sweep.sweep_id, sweep_dir=sweep_dir, episodes=len(sweep.episodes), skipped=len(plan.done),
        completed=progress.completed, failed=progress.failed, grading_failed=progress.grading_failed,
        interrupted=interrupted, duration_s=time.monotonic() - progress.started,
    )
    write_manifest(sweep, sweep_dir, job_path=job_path, run={
        "started_at": started_at.isoformat(), "finished_at": datetime.now(UTC).isoformat(),
        **result.model_dump(mode="json", exclude={"sweep_dir", "sweep_id", "mlflow_run_id", "tracking_uri",
                                                  "finish_errors"})})
    if not interrupted:
        _finish(result, live, console, skip_finished=not changes)
    if result.interrupted:
        console.print(f"not compacted or logged to MLflow in full (interrupted): resume, or run "
                      f"`{flowstate_command(f'compact {sweep_dir}')}` and `{flowstate_command(f'track {sweep_dir}')}`")
    return result


def _finish(result: SweepResult, live: LiveTracking | None, console: Console, *, skip_finished: bool) -> None:
    """Compact and log the sweep (:mod:`pipeline.run.finish`). Stopped meanwhile, it keeps every episode
    and what the steps recorded as done; the runs the live tracking left RUNNING for the logging end
    KILLED."""
    try:
        result.mlflow_run_id, result.tracking_uri, result.finish_errors = finish_sweep(
            result.sweep_dir, console, skip_finished=skip_finished)
    except KeyboardInterrupt:
        result.interrupted = True
        if live is not None:
            live.close(KILLED)
