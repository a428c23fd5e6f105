"""``flowstate run``: load a job, resume, run the episodes on Ray, finish the sweep, report."""

from __future__ import annotations

import os
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

import ray
from pydantic import BaseModel
from rich.console import Console
from rich.live import Live
from rich.table import Table

from pipeline.data import DATA_ENV_VAR
from pipeline.config import load_job
from pipeline.estimate import estimate
from pipeline.manifest import write_manifest
from pipeline.runner import Dispatcher, Progress, check_schema_enforcement, start_deployments, stop_deployments
from pipeline.store.reader import done_episodes
from pipeline.sweep import Sweep, expand


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


def _fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


def status_line(p: Progress) -> str:
    elapsed = time.monotonic() - p.started
    rate = p.finished / elapsed if elapsed > 0 else 0.0
    mean = f" · mean reward {sum(p.rewards) / len(p.rewards):.3f}" if p.rewards else ""
    return (f"episodes {p.finished}/{p.todo} done ({p.completed} ok, {p.failed} failed, {p.grading_failed} ungraded"
            f"{f', {p.retried} retries' if p.retried else ''}) · {p.running} running · {p.model_calls} model calls · "
            f"{p.total_tokens:,} tokens · {rate * 3600:,.0f} episodes/h · ETA {_fmt_duration(p.eta_s())}{mean}")


def _plan_table(sweep: Sweep, sweep_dir: Path, done: set[str]) -> Table:
    table = Table(title=f"sweep {sweep.sweep_id} (dry run: nothing started)")
    for column in ("cell", "episodes", "done", "to run", "model calls (est.)", "tokens (est.)", "estimate from"):
        table.add_column(column, justify="left" if column in ("cell", "estimate from") else "right")
    total_calls = total_tokens = 0.0
    for e in estimate(sweep, sweep_dir, done):
        total_calls += e.model_calls
        total_tokens += e.tokens
        table.add_row(e.cell, str(e.episodes), str(e.done), str(e.episodes - e.done), f"{e.model_calls:,.0f}",
                      f"{e.tokens:,.0f}", e.source)
    todo = sum(1 for s in sweep.episodes if s.episode_id not in done)
    table.add_row("total", str(len(sweep.episodes)), str(len(sweep.episodes) - todo), str(todo),
                  f"{total_calls:,.0f}", f"{total_tokens:,.0f}", "", style="bold")
    return table


def _move_aside(sweep_dir: Path) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    target = sweep_dir.with_name(f"{sweep_dir.name}.replaced-{stamp}")
    shutil.move(str(sweep_dir), target)
    return target


def _init_ray(address: str | None) -> None:
    if ray.is_initialized():
        return
    env = {k: os.environ[k] for k in (DATA_ENV_VAR,) if k in os.environ}
    # A job's own plug-in modules next to it must import in the actors too (``plugins:``).
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.getcwd(), os.environ.get("PYTHONPATH")) if p)
    ray.init(address=address or os.environ.get("RAY_ADDRESS") or None, include_dashboard=False,
             log_to_driver=False, runtime_env={"env_vars": env})


def run_sweep(job_path: Path, *, out: Path | None = None, address: str | None = None, fresh: bool = False,
              dry_run: bool = False, console: Console | None = None) -> SweepResult | None:
    """Run (or resume) the sweep of a job file; ``None`` for a dry run."""
    console = console or Console()
    job = load_job(job_path)
    sweep = expand(job)
    sweep_dir = (out or job.output_dir) / sweep.sweep_id
    if fresh and sweep_dir.exists():
        console.print(f"--fresh: moved the earlier results to {_move_aside(sweep_dir)}")
    done = set(done_episodes(sweep_dir))
    todo = [spec for spec in sweep.episodes if spec.episode_id not in done]
    if dry_run:
        console.print(_plan_table(sweep, sweep_dir, done))
        return None
    console.print(f"sweep {sweep.sweep_id}: {len(sweep.cells)} cells, {len(sweep.episodes)} episodes, "
                  f"{len(done)} already done, {len(todo)} to run -> {sweep_dir}")
    started_at = datetime.now(UTC)
    progress = Progress(total=len(sweep.episodes), skipped=len(done))
    interrupted = False
    write_manifest(sweep, sweep_dir, job_path=job_path)
    if todo:
        _init_ray(address)
        deployments = start_deployments(job)
        try:
            check_schema_enforcement(job, deployments)
        except BaseException:
            stop_deployments(deployments)
            raise
        write_manifest(sweep, sweep_dir, job_path=job_path,
                       deployments={name: d.describe() for name, d in deployments.items()})
        progress.started = time.monotonic()  # rates count from the first dispatch, not from start-up
        try:
            interrupted = _dispatch(sweep, sweep_dir, deployments, todo, progress, console)
        finally:
            stop_deployments(deployments)
    result = SweepResult(
        sweep_id=sweep.sweep_id, sweep_dir=sweep_dir, episodes=len(sweep.episodes), skipped=len(done),
        completed=progress.completed, failed=progress.failed, grading_failed=progress.grading_failed,
        interrupted=interrupted, duration_s=time.monotonic() - progress.started,
    )
    write_manifest(sweep, sweep_dir, job_path=job_path, run={
        "started_at": started_at.isoformat(), "finished_at": datetime.now(UTC).isoformat(),
        **result.model_dump(mode="json", exclude={"sweep_dir", "sweep_id", "mlflow_run_id", "tracking_uri",
                                                  "finish_errors"})})
    if interrupted:
        console.print(f"not compacted or logged to MLflow (interrupted): resume, or run `flowstate compact {sweep_dir}` "
                      f"and `flowstate track {sweep_dir}`")
    else:
        _finish(result, console)
    return result


def _finish(result: SweepResult, console: Console) -> None:
    """Compact the sweep's files, then log it to MLflow. Either may fail without losing anything: the
    Parquet files stay as they are and both steps can be run again on their own."""
    from pipeline.analysis.compact import compact
    from pipeline.analysis.tracking import log_sweep

    sweep_dir = result.sweep_dir
    try:
        c = compact(sweep_dir)
        console.print(f"compacted {c.files_merged} files into {c.parts_written} parts ({c.rows_written:,} rows) "
                      f"in {c.duration_s:.1f}s")
    except Exception as exc:  # noqa: BLE001 - reported, and the per-episode files are intact
        result.finish_errors.append(f"compaction failed ({exc}); run `flowstate compact {sweep_dir}` to retry")
    try:
        with console.status("logging to MLflow"):
            t = log_sweep(sweep_dir)
        result.mlflow_run_id, result.tracking_uri = t.parent_run_id, t.tracking_uri
        console.print(f"MLflow: run {t.parent_run_id} ({len(t.child_run_ids)} cells, {t.metrics_logged} metrics, "
                      f"{t.traces_logged} traces) at {t.tracking_uri} in {t.duration_s:.1f}s")
    except Exception as exc:  # noqa: BLE001 - e.g. a tracking server that is down; the results are on disk
        result.finish_errors.append(f"MLflow logging failed ({type(exc).__name__}: {exc}); "
                                    f"run `flowstate track {sweep_dir}` to retry")
    for error in result.finish_errors:
        console.print(f"[red]{error}[/red]")


def _dispatch(sweep: Sweep, sweep_dir: Path, deployments: dict, todo: list, progress: Progress, console: Console) -> bool:
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
        Dispatcher(sweep, sweep_dir, deployments, progress, show).run(todo)
        return False
    except KeyboardInterrupt:
        console.print("interrupted: finished episodes are kept; run the same command again to resume")
        return True
    finally:
        if live is not None:
            live.stop()
        console.print(status_line(progress))
