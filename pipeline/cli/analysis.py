"""``flowstate query|compact|report|track``: registered on the main parser by ``add_commands``.

Handlers return an exit code and raise ``CliError`` for errors the user can fix.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

from pipeline.analysis.catalog import FORMATS, list_queries
from pipeline.core.cli_hooks import CliError
from pipeline.core.commands import flowstate_command


def _params(pairs: list[str]) -> dict[str, str]:
    params = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"--param takes KEY=VALUE, got {pair!r}")
        params[key.strip()] = value
    return params


Handler = Callable[[argparse.Namespace], int]


def _reading_results(handler: Handler) -> Handler:
    """A DuckDB error over results files (a file no check caught) as a user error: one line, and what to do."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except duckdb.Error as exc:
            raise CliError(f"{exc}; `{flowstate_command('verify')}` checks the sweep's files") from None

    return run


def _query(args: argparse.Namespace) -> int:
    from pipeline.analysis.formats import write_result
    from pipeline.analysis.query import run_query
    from pipeline.store.output_paths import output_file

    if args.format == "parquet" and args.out is None:
        raise CliError("--format parquet writes a file: give --out FILE.parquet")
    if args.out is not None:
        output_file(args.out, "--out")
    table = run_query(args.query, args.runs, _params(args.param))
    write_result(table, args.format, args.out, title=args.query)
    if table.num_rows == 0:  # said apart from the result, which stays well-formed (CSV's header, JSON's [])
        print(f"{args.query}: no rows over {args.runs}", file=sys.stderr)
    return 0


def _compact(args: argparse.Namespace) -> int:
    from pipeline.store.compact import compact
    from pipeline.store.files import sweep_dirs

    for sweep in sweep_dirs(args.dir):
        r = compact(sweep)
        copies = f"; the older copy of {r.copies_dropped} episodes dropped" if r.copies_dropped else ""
        print(f"{sweep}: {r.files_merged} files -> {r.parts_written} parts ({r.rows_written:,} rows) in "
              f"{r.duration_s:.1f}s; {r.leftovers_removed} leftovers removed{copies}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from pipeline.analysis.report import build_report
    from pipeline.store.output_paths import output_file

    out = output_file(args.out or Path(args.dir) / "report.md", "--out" if args.out else "report")
    report = build_report(args.dir, out, baseline=args.baseline)
    print(f"report: {report.markdown}" + "".join(f"\n  figure: {f}" for f in report.figures))
    return 0


def _track(args: argparse.Namespace) -> int:
    from mlflow.exceptions import MlflowException

    from pipeline.config.secrets import redact_url
    from pipeline.store.files import sweep_dirs
    from pipeline.tracking.mlflow_log import log_sweep

    for sweep in sweep_dirs(args.dir):
        try:
            r = log_sweep(sweep, experiment=args.experiment, tracking_uri=args.tracking_uri)
        except MlflowException as exc:  # a store that fails: its message names the URL, password and all
            raise CliError(f"{sweep}: MLflow logging failed ({redact_url(str(exc))}); the results are on disk: run "
                           f"`{flowstate_command(f'track {sweep}')}` again once the store answers") from None
        print(f"{sweep.name}: run {r.parent_run_id} ({len(r.child_run_ids)} cells, {r.metrics_logged} metrics, "
              f"{r.traces_logged} traces) in experiment {r.experiment_id} at {r.tracking_uri}")
    return 0


def add_commands(subparsers: Any) -> None:
    """Register the analysis subcommands on the ``flowstate`` parser's subparsers."""
    query = subparsers.add_parser("query", help="run a SQL query (sql/NAME.sql or your own FILE.sql) over results",
                                  description=f"shipped queries: {', '.join(list_queries())}")
    query.add_argument("query", help="NAME of a shipped query, or FILE.sql")
    query.add_argument("--runs", type=Path, required=True, help="a sweep directory, or a folder of them")
    query.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="a named query parameter")
    query.add_argument("--format", choices=FORMATS, default="table")
    query.add_argument("--out", type=Path, help="write to this file instead of the terminal")
    query.set_defaults(handler=_reading_results(_query))

    compact = subparsers.add_parser("compact", help="merge a sweep's per-episode Parquet files (safe to interrupt)")
    compact.add_argument("dir", type=Path, help="a sweep directory, or a folder of them")
    compact.set_defaults(handler=_reading_results(_compact))

    report = subparsers.add_parser("report", help="markdown report with the paper's tables and figures")
    report.add_argument("dir", type=Path, help="a sweep directory, or a folder of them")
    report.add_argument("--out", type=Path, help="report file (default: DIR/report.md)")
    report.add_argument("--baseline", help="method compared with (default: the jobs' analysis.baseline)")
    report.set_defaults(handler=_reading_results(_report))

    track = subparsers.add_parser("track", help="log or re-log a sweep to MLflow")
    track.add_argument("dir", type=Path, help="a sweep directory, or a folder of them")
    track.add_argument("--experiment", help="MLflow experiment (default: the job's tracking.experiment or name)")
    track.add_argument("--tracking-uri", help="MLflow tracking URI (default: the job's, MLFLOW_TRACKING_URI, "
                                              "else ./mlflow.db)")
    track.set_defaults(handler=_reading_results(_track))
