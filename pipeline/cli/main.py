"""`flowstate ...`: the command line. Each subcommand is a small function; errors print one clear line."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import ValidationError

from flowstate.errors import FlowStateError
from pipeline.core.cli_hooks import CliError, CliHooks, read_json, write_json
from pipeline.core.commands import flowstate_command, mlflow_command


# -- trace -------------------------------------------------------------------------------------
def _trace_replay(args: argparse.Namespace) -> int:
    from flowstate.trace import TraceError, replay_trace

    data = read_json(args.trace)
    try:
        result = replay_trace(data)
    except ValidationError as exc:
        raise CliError(f"{args.trace}: not a valid trace:\n{exc}") from None
    except TraceError as exc:
        raise CliError(f"{args.trace}: {exc}") from None
    write_json(args.out, result)
    steps = result["steps"]
    accepted = sum(len(s["accepted_ops"]) for s in steps)
    rejected = sum(len(s["rejected_ops"]) for s in steps)
    disclosed = sum(len(s["disclosed"]) for s in steps)
    print(
        f"replayed {len(result['repository']['requests'])} requests, {len(steps)} steps: "
        f"{accepted} ops accepted, {rejected} rejected, {disclosed} states disclosed, "
        f"{len(result['repository']['nodes'])} nodes persisted -> {args.out}"
    )
    return 0


# -- run ---------------------------------------------------------------------------------------
CLAIM_LOST_STATUS = 3  # another driver took the sweep over while this one was stalled (pipeline.store.claim)
RAY_AUTH_MODE = "RAY_AUTH_MODE"  # Ray's authentication mode: token or disabled


def _run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from pipeline.run.launch import run_sweep
    from pipeline.run.stopping import install_stop_handlers, stop_status
    from pipeline.store.claim import ClaimLostError

    # Ctrl-C and SIGTERM (a scheduler, `kill`) stop cleanly: finished episodes kept, servers stopped.
    install_stop_handlers()
    console = Console() if sys.stdout.isatty() else Console(width=160)  # logs: no wrapping at 80 columns
    try:
        result = run_sweep(args.job, out=args.out, address=args.address, fresh=args.fresh, dry_run=args.dry_run,
                           wait=args.wait, console=console)
    except KeyboardInterrupt:  # one the sweep did not handle itself (planning, waiting for its claim)
        print("flowstate: interrupted", file=sys.stderr)
        return stop_status()
    except ClaimLostError as exc:
        print(f"flowstate: {exc}. This driver stopped dispatching and wrote nothing more; its episodes in flight "
              "were cancelled unwritten, and the driver that holds the sweep runs them", file=sys.stderr)
        return CLAIM_LOST_STATUS
    if result is None:
        return 0
    print(f"results: {result.sweep_dir}")
    print(f"  query:  {flowstate_command(f'query pass_rate --runs {result.sweep_dir}')}   "
          f"({flowstate_command('query --help')} lists the others)")
    print(f"  report: {flowstate_command(f'report {result.sweep_dir}')}")
    if result.tracking_uri:
        print(f"  compare runs: {mlflow_command(f'ui --backend-store-uri {result.tracking_uri}')}")
    if result.interrupted:
        return stop_status()
    return 1 if result.failed or result.finish_errors else 0


# -- grade / show --------------------------------------------------------------------------------
def _grade(args: argparse.Namespace) -> int:
    import asyncio

    from pipeline.run.regrade import regrade
    from pipeline.store.files import sweep_dirs

    for sweep in sweep_dirs(args.runs):
        summary = asyncio.run(regrade(sweep, basis=args.basis, plugins=args.plugin))
        mean = "n/a" if summary.mean_reward is None else f"{summary.mean_reward:.4f}"
        print(f"{sweep.name}: graded {summary.episodes} episodes ({summary.changed} changed, "
              f"{summary.still_ungraded} ungraded), mean reward {mean}")
        if summary.needs_judge:
            print(f"  {summary.needs_judge} episodes need a judge model and were left as they were (grade them "
                  "on a basis without one, if the benchmark has one, or re-run the job, which starts its judge)")
    return 0


def _verify(args: argparse.Namespace) -> int:
    import warnings

    from pipeline.store.claim import read_claim
    from pipeline.store.copies import shared_episodes
    from pipeline.store.files import IncompleteResultsWarning, sweep_dirs
    from pipeline.store.verify import verify_sweep

    sweeps = sweep_dirs(args.runs)
    bad = copies = 0
    for sweep in sweeps:
        holder = read_claim(sweep)
        if holder is not None:
            print(f"{sweep.name}: held by {holder.describe()}: files may change while they are checked", file=sys.stderr)
        result = verify_sweep(sweep)
        legacy = f", {result.unrecorded} written before the inventory" if result.unrecorded else ""
        twice = f"; {len(result.duplicates)} parts hold episodes a newer part holds too" if result.duplicates else ""
        print(f"{sweep.name}: {result.checked} files checked in {result.duration_s:.1f}s{legacy}: "
              + (f"{len(result.problems)} bad or missing" if result.problems else "all as written") + twice)
        for problem in result.problems + result.duplicates:
            print(f"  {problem.describe()}")
        bad += len(result.problems)
        copies += len(result.duplicates)
    with warnings.catch_warnings():  # a broken file is listed above already
        warnings.simplefilter("ignore", IncompleteResultsWarning)
        shared = shared_episodes(sweeps)
    for one, other, count in shared:
        print(f"{one.name} and {other.name} hold {count} of the same episodes (a copied sweep, or jobs that share "
              "cells): readers of both read each episode once, from one of them")
    if bad:
        print(f"`{flowstate_command('run')}` of the job moves bad files to quarantine/ and runs their episodes again",
              file=sys.stderr)
    return 1 if bad or copies else 0


def _show(args: argparse.Namespace) -> int:
    from pipeline.cli.show import load_episode, render

    filters = {"cell": args.cell, "method": args.method, "task": args.task, "status": args.status}
    if args.list:
        return _list_episodes(args.runs, filters, args.episode_id)
    if args.episode_id is None:
        raise CliError(f"show needs an EPISODE_ID; `{flowstate_command('show --list')}` lists them")
    if given := [f"--{name}" for name, value in filters.items() if value is not None]:
        raise CliError(f"{', '.join(given)} filter(s) the list: use them with --list")
    data = load_episode(args.runs, args.episode_id)
    for line in render(data):
        print(line)
    return 0


def _list_episodes(runs: Path, filters: dict[str, str | None], episode_id: str | None) -> int:
    import pyarrow as pa

    from pipeline.analysis.formats import write_result
    from pipeline.cli.show import list_episodes

    if episode_id is not None:
        raise CliError(f"--list lists episodes: give no EPISODE_ID (got {episode_id!r}), or drop --list to show it")
    rows = list_episodes(runs, **filters)
    if not rows:
        print(f"no episodes under {runs}" + (" that match" if any(filters.values()) else ""), file=sys.stderr)
        return 0
    write_result(pa.Table.from_pylist(rows), "table", title=f"{len(rows)} episodes under {runs}")
    return 0


def _add_plugin_commands(hooks: CliHooks) -> None:
    """Every registered benchmark's own commands (data fetching, tools, exports), and the fetch of
    the data methods read."""
    from pipeline.benchmarks import method_data
    from pipeline.benchmarks.base import BENCHMARKS
    for name in BENCHMARKS.names():
        BENCHMARKS.get(name).add_commands(hooks)
    method_data.add_commands(hooks)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="flowstate", description="FlowState experiments: run, inspect and analyse.")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run (or resume) the sweep of a job file on Ray")
    run.add_argument("job", type=Path, help="jobs/NAME.yaml")
    run.add_argument("--out", type=Path, help="output directory (default: the job's output_dir)")
    run.add_argument("--address", help="Ray cluster address (default: RAY_ADDRESS, else a local Ray)")
    resume = run.add_mutually_exclusive_group()
    resume.add_argument("--resume", dest="fresh", action="store_false", default=False,
                        help="skip episodes already in the run's episodes table (default)")
    resume.add_argument("--fresh", dest="fresh", action="store_true",
                        help="start over: move earlier results of this sweep aside")
    run.add_argument("--dry-run", action="store_true", help="print the expanded sweep and estimates; start nothing")
    run.add_argument("--wait", action="store_true",
                     help="if another driver holds the sweep, wait for it to finish (default: refuse at once)")
    run.set_defaults(handler=_run)

    grade = commands.add_parser("grade", help="grade stored episodes again (no re-simulation)")
    grade.add_argument("runs", type=Path, help="a sweep directory, or a folder of sweeps")
    grade.add_argument("--basis", help="the benchmark's grading basis (τ-bench: task or classic); default: each cell's own")
    grade.add_argument("--plugin", action="append", default=[], metavar="MODULE",
                       help="import MODULE for the sweep's benchmarks or methods, beside the installed plug-ins "
                            "(the modules a results folder names are never imported)")
    grade.set_defaults(handler=_grade)

    verify = commands.add_parser("verify", help="check every result file against the sweep's inventory")
    verify.add_argument("runs", type=Path, help="a sweep directory, or a folder of sweeps")
    verify.set_defaults(handler=_verify)

    show = commands.add_parser("show", help="print one episode readably (--list: the episodes there are)")
    show.add_argument("episode_id", nargs="?", help="episode id (a unique prefix is enough)")
    show.add_argument("--runs", type=Path, default=Path("runs"), help="a sweep directory or a folder of sweeps")
    show.add_argument("--list", action="store_true", help="list the episodes (id, cell, task, trial, reward, status)")
    show.add_argument("--cell", help="with --list: cells whose label contains this text")
    show.add_argument("--method", help="with --list: this method label")
    show.add_argument("--task", help="with --list: this task id")
    show.add_argument("--status", choices=("completed", "grading_failed", "failed"), help="with --list: this outcome")
    show.set_defaults(handler=_show)

    from pipeline.cli.analysis import add_commands as add_analysis_commands

    add_analysis_commands(commands)

    data = commands.add_parser("data", help="benchmark data").add_subparsers(dest="data_command", required=True)
    fetch = data.add_parser("fetch", help="download a benchmark's (or the methods') data from its public source "
                                                    "and verify checksums")
    export = commands.add_parser("export", help="export results to other tools' formats")
    hooks = CliHooks(commands=commands, fetch=fetch.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK"),
                     export=export.add_subparsers(dest="export_format", required=True))
    _add_plugin_commands(hooks)

    trace = commands.add_parser("trace", help="work with recorded model outputs").add_subparsers(dest="trace_command",
                                                                                                 required=True)
    replay = trace.add_parser("replay", help="run the FlowState runtime over a recorded trace (no model, no environment)")
    replay.add_argument("trace", type=Path, help="TRACE.json: requests with completions and observations")
    replay.add_argument("--out", type=Path, required=True, help="where to write the replay result (JSON)")
    replay.set_defaults(handler=_trace_replay)
    return parser


def _warning_line(message: Warning | str, category: type[Warning], *rest: object, **more: object) -> str:
    """Warnings for users: one line, no source location."""
    return f"flowstate: warning: {message}\n"


def _choose_ray_authentication(argv: Sequence[str]) -> None:
    """Token authentication for a local Ray cluster a run starts, chosen explicitly. Unchosen, Ray
    chooses it too, but warns so on every start; it reads the choice once, when it is imported (the
    plug-ins the parser lists import it), hence here. A cluster joined by address keeps its own."""
    joining = os.environ.get("RAY_ADDRESS") or any(arg.split("=")[0] == "--address" for arg in argv)
    if not joining:
        os.environ.setdefault(RAY_AUTH_MODE, "token")


def main(argv: Sequence[str] | None = None) -> int:
    import warnings

    _choose_ray_authentication(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    warnings.formatwarning = _warning_line
    try:
        return handler(args)
    except FlowStateError as exc:  # the user can act on it: one line; anything else is a bug, with its traceback
        print(f"flowstate: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a write the filesystem refused (read-only, no permission, full)
        from pipeline.store.output_paths import REFUSED, refused_write

        if exc.errno not in REFUSED:
            raise
        print(f"flowstate: error: {refused_write(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("flowstate: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
