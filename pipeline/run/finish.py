"""Phase 3 of ``flowstate run``: compact the sweep's files, then log it to MLflow.

Either may fail, or be stopped (Ctrl-C, SIGTERM: ``KeyboardInterrupt``), without losing anything: the
Parquet files stay as they are and both steps can be run again on their own (``flowstate compact
DIR``, ``flowstate track DIR``).
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from pipeline.config.secrets import redact_url
from pipeline.core.commands import flowstate_command
from pipeline.core.disk_full import describe, remedy, storage_failure
from pipeline.run.stopping import raise_if_stopping
from pipeline.store.manifest import finished_steps, record_finished


def finish_sweep(sweep_dir: Path, console: Console, *, skip_finished: bool = False) -> tuple[str | None, str | None, list[str]]:
    """Compact, then log; returns (MLflow parent run id, tracking URI, what failed and how to retry).
    ``skip_finished``: nothing changed since the last run, so the steps the manifest records as done
    are not done again (neither MLflow nor the files are touched); an unfinished one still runs."""
    finished = finished_steps(sweep_dir) if skip_finished else {}
    errors: list[str] = []
    run_id = uri = None
    if "compacted" in finished:
        console.print(f"already compacted ({finished['compacted']['at']})")
    else:
        from pipeline.store.compact import compact

        try:
            c = compact(sweep_dir)
            record_finished(sweep_dir, "compacted")
            console.print(f"compacted {c.files_merged} files into {c.parts_written} parts ({c.rows_written:,} rows) "
                          f"in {c.duration_s:.1f}s")
        except Exception as exc:  # noqa: BLE001 - reported, and the per-episode files are intact
            raise_if_stopping()  # a stop that DuckDB turned into "Query interrupted" is no failure
            disk = storage_failure(exc)  # a full disk: say which file, and what to do first
            first = f"{remedy(disk)}, then " if disk else ""
            errors.append(f"compaction failed ({describe(disk) if disk else exc}); {first}run "
                          f"`{flowstate_command(f'compact {sweep_dir}')}` to retry")
    tracked = finished.get("tracked")
    if tracked is not None:
        run_id, uri = tracked.get("run_id"), tracked.get("tracking_uri")
        console.print(f"already logged to MLflow: run {run_id} at {uri} ({tracked['at']})")
    else:
        from pipeline.tracking.mlflow_log import log_sweep

        try:
            with console.status("logging to MLflow"):
                t = log_sweep(sweep_dir)
            run_id, uri = t.parent_run_id, t.tracking_uri
            record_finished(sweep_dir, "tracked", run_id=run_id, tracking_uri=uri)
            console.print(f"MLflow: run {t.parent_run_id} ({len(t.child_run_ids)} cells, {t.metrics_logged} metrics, "
                          f"{t.traces_logged} traces) at {t.tracking_uri} in {t.duration_s:.1f}s")
        except Exception as exc:  # noqa: BLE001 - e.g. a tracking server that is down; the results are on disk
            raise_if_stopping()
            # the store's URL is in MLflow's errors, password and all
            errors.append(f"MLflow logging failed ({type(exc).__name__}: {redact_url(str(exc))}); run "
                          f"`{flowstate_command(f'track {sweep_dir}')}` to retry")
    for error in errors:
        console.print(f"[red]{error}[/red]")
    return run_id, uri, errors
