"""`flowstate memoryarena grade|subtasks|travel-tool` (CONTRACT §8–9), `check-db` and `make-db` (the
shopping store's product database), and `flowstate data fetch memoryarena`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import get_args

from pipeline.core.cli_hooks import CliError, CliHooks, read_json, write_json


def _tasks(args: argparse.Namespace) -> list:
    from pipeline.benchmarks.memoryarena.data import MemoryArenaDataError, parse_tasks

    try:
        text = args.tasks.read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"{args.tasks}: {exc.strerror}") from None
    try:
        return parse_tasks(text, args.env, str(args.tasks))
    except MemoryArenaDataError as exc:
        raise CliError(str(exc)) from None


def _grade(args: argparse.Namespace) -> int:
    from pipeline.benchmarks.memoryarena.contract_formats import AnswersError, grade_answers

    tasks = _tasks(args)
    try:
        out = grade_answers(args.env, tasks, read_json(args.answers))
    except AnswersError as exc:
        raise CliError(f"{args.answers}: {exc}") from None
    write_json(args.out, out)
    a = out["aggregate"]
    print(f"{args.env}: {a['n_tasks']} tasks, {a['n_subtasks']} subtasks; SR {a['SR']:.4f}, PS {a['PS']:.4f}"
          + (f", sPS {a['sPS']:.4f}" if "sPS" in a else "") + f" -> {args.out}")
    return 0


def _subtasks(args: argparse.Namespace) -> int:
    from pipeline.benchmarks.memoryarena.contract_formats import subtask_texts

    out = subtask_texts(args.env, _tasks(args))
    write_json(args.out, out)
    print(f"{sum(len(t['subtasks']) for t in out['tasks'])} subtasks of {len(out['tasks'])} tasks -> {args.out}")
    return 0


def _travel_tool(args: argparse.Namespace) -> int:
    from pipeline.benchmarks.memoryarena.data import MemoryArenaDataError
    from pipeline.benchmarks.memoryarena.travel_tools import run_calls, travel_db_at

    calls = read_json(args.calls)
    if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
        raise CliError(f'{args.calls}: expected a JSON list of {{"name": ..., "arguments": {{...}}}}')
    try:
        db = travel_db_at(args.db)
    except MemoryArenaDataError as exc:
        raise CliError(str(exc)) from None
    results = run_calls(calls, db)
    write_json(args.out, results)
    print(f"{len(results)} tool calls on {args.db} -> {args.out}")
    return 0


def _fetch(args: argparse.Namespace) -> int:
    from pipeline.benchmarks.memoryarena.fetch import DEFAULT_BASE_URL, fetch_memoryarena
    from pipeline.core.data import BenchmarkDataError

    try:
        report = fetch_memoryarena(args.data_dir, base_url=args.base_url or DEFAULT_BASE_URL,
                                   accept_new_checksums=args.accept_new_checksums)
    except BenchmarkDataError as exc:
        raise CliError(str(exc)) from None
    print(f"MemoryArena task files in {report.root}: {len(report.downloaded)} downloaded, "
          f"{len(report.already_present)} already present and verified")
    for config, (expected, actual) in report.accepted.items():
        print(f"  {config}: accepted a new SHA-256 {actual} (pinned: {expected}); recorded in {report.accepted_file}")
    if args.with_shopping_db:
        from pipeline.benchmarks.memoryarena.shopping.fetch_db import HUB, fetch_product_db

        try:
            db = fetch_product_db(args.data_dir, hub=args.hub_url or HUB)
        except BenchmarkDataError as exc:
            raise CliError(str(exc)) from None
        print(f"product database in {db.folder} (commit {db.revision[:12]}): {len(db.downloaded)} files downloaded "
              f"({db.bytes / 1e6:,.1f} MB), {len(db.already_present)} already present and verified")
    return 0


def _check_db(args: argparse.Namespace) -> int:
    from pipeline.benchmarks.memoryarena.shopping.checkdb import check_db
    from pipeline.benchmarks.memoryarena.shopping.productdb import ProductDbError

    try:
        found = check_db(args.dir)
    except ProductDbError as exc:
        raise CliError(str(exc)) from None
    print(f"{args.dir}: {found.products:,} products ({found.with_attributes:,} with attributes), {found.chains} "
          f"category chains, {found.catalog_entries:,} catalogue entries in {found.catalog_files} files, "
          f"{found.bytes / 1e6:,.1f} MB: usable")
    for warning in found.warnings:
        print(f"  warning: {warning}")
    return 0


def _make_db(args: argparse.Namespace) -> int:
    from pipeline.benchmarks.memoryarena.shopping.generate import write_product_db
    from pipeline.benchmarks.memoryarena.shopping.productdb import ProductDbError

    try:
        count = write_product_db(args.out, args.products, seed=args.seed)
    except ProductDbError as exc:
        raise CliError(str(exc)) from None
    print(f"{count:,} made-up products (the examples' catalogue and {args.products:,} generated) -> {args.out}")
    return 0


def add_commands(cli: CliHooks) -> None:
    from pipeline.benchmarks.memoryarena.data import Config

    envs = list(get_args(Config))
    group = cli.commands.add_parser("memoryarena", help="MemoryArena graders and conformance tools").add_subparsers(
        dest="memoryarena_command", required=True)
    grade = group.add_parser("grade", help="grade answers exactly as upstream (no network, no model)")
    grade.add_argument("--env", required=True, choices=envs)
    grade.add_argument("--tasks", type=Path, required=True, help="TASKS.jsonl: task records in the dataset's format")
    grade.add_argument("--answers", type=Path, required=True, help="ANSWERS.json: the agent's answers per subtask")
    grade.add_argument("--out", type=Path, required=True)
    grade.set_defaults(handler=_grade)
    subtasks = group.add_parser("subtasks", help="write the subtask texts the environment defines")
    subtasks.add_argument("--env", required=True, choices=envs)
    subtasks.add_argument("--tasks", type=Path, required=True)
    subtasks.add_argument("--out", type=Path, required=True)
    subtasks.set_defaults(handler=_subtasks)
    tool = group.add_parser("travel-tool", help="run travel tool calls over a travel database folder")
    tool.add_argument("--db", type=Path, required=True, help="DB_DIR: travel_db/ in upstream's layout")
    tool.add_argument("--calls", type=Path, required=True, help='CALLS.json: [{"name": ..., "arguments": {...}}]')
    tool.add_argument("--out", type=Path, required=True)
    tool.set_defaults(handler=_travel_tool)
    check = group.add_parser("check-db", help="check a shopping product database's files before a sweep")
    check.add_argument("dir", type=Path, help="the database folder (items_shuffle.json, items_ins_v2.json, ...)")
    check.set_defaults(handler=_check_db)
    make = group.add_parser("make-db", help="write a made-up product database in the real files' format")
    make.add_argument("--out", type=Path, required=True)
    make.add_argument("--products", type=int, default=1000, help="generated products beside the examples' 90")
    make.add_argument("--seed", type=int, default=0)
    make.set_defaults(handler=_make_db)

    fetch = cli.add_fetch("memoryarena", help=f"MemoryArena task files from Hugging Face ({', '.join(envs)})")
    fetch.add_argument("--base-url", default=None, help="mirror of the dataset at the pinned revision")
    fetch.add_argument("--accept-new-checksums", action="store_true",
                       help="accept files whose SHA-256 differs from the pinned (third-party) values, and record them")
    fetch.add_argument("--with-shopping-db", action="store_true",
                       help="also the shopping store's product database (ai-hyz/MemoryArena-product-db, several GB)")
    fetch.add_argument("--hub-url", default=None, help="the Hugging Face Hub (or a mirror) for the product database")
    fetch.set_defaults(handler=_fetch)
