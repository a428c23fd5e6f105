"""`flowstate data fetch taubench`, `flowstate taubench exec|replay` and `flowstate export tau2`:
data, conformance tools and the upstream results format."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from flowstate import ToolCall
from pipeline.core.cli_hooks import CliError, CliHooks, read_json, write_json


def _fetch(args: argparse.Namespace) -> int:
    from pipeline.benchmarks.taubench.data import TauBenchDataError
    from pipeline.benchmarks.taubench.fetch import DEFAULT_BASE_URL, fetch_taubench

    try:
        report = fetch_taubench(args.data_dir, base_url=args.base_url or DEFAULT_BASE_URL, derived_from=args.derived_from)
    except TauBenchDataError as exc:
        raise CliError(str(exc)) from None
    print(f"τ-bench data in {report.root}: {len(report.downloaded)} downloaded, "
          f"{len(report.already_present)} already present and verified, "
          f"{len(report.derived)} derived from upstream sources, {len(report.derived_copied)} copied")
    for relative, error in report.derive_errors.items():
        print(f"  {relative}: derivation failed, used the copy from --derived-from ({error})")
    print(f"use it with: export FLOWSTATE_DATA={args.data_dir}")
    return 0


def _read_calls(path: Path) -> list[ToolCall]:
    data = read_json(path)
    if not isinstance(data, list):
        raise CliError(f"{path}: expected a JSON list of {{\"name\": ..., \"arguments\": {{...}}}}")
    try:
        return [ToolCall.model_validate(item) for item in data]
    except ValueError as exc:
        raise CliError(f"{path}: {exc}") from None


def conformance_json(result: dict[str, Any]) -> dict[str, Any]:
    """The documented OUT.json: outputs are the exact strings the agent would see."""
    return {"outputs": [o["content"] for o in result["outputs"]], "final_db_hash": result["final_db_hash"],
            "changed": result["changed"]}


def _exec(args: argparse.Namespace) -> int:
    from pipeline.benchmarks.taubench.conformance import exec_calls

    result = conformance_json(exec_calls(args.domain, _read_calls(args.calls)))
    write_json(args.out, result)
    print(f"{len(result['outputs'])} calls on a fresh {args.domain} database -> {args.out} "
          f"(final hash {result['final_db_hash'][:12]}…, {sum(len(v) for v in result['changed'].values())} records changed)")
    return 0


def _gold_hashes() -> dict[str, dict[str, str]]:
    from pipeline.benchmarks.taubench.data import data_root

    path = data_root() / "gold_hashes.json"
    return {domain: entry["gold_hash"] for domain, entry in json.loads(path.read_text())["domains"].items()}


def _replay(args: argparse.Namespace) -> int:
    from pipeline.benchmarks.taubench.conformance import replay_gold
    from pipeline.benchmarks.taubench.domains import load_tasks

    if args.all == (args.task is not None):
        raise CliError("give either --task ID or --all")
    domains = [args.domain] if args.domain else ["airline", "retail"]
    if args.task is not None and not args.domain:
        raise CliError("--task needs --domain")
    jobs = [(d, args.task) for d in domains] if args.task is not None else [
        (d, t.id) for d in domains for t in load_tasks(d)]
    gold = _gold_hashes()
    mismatched = []
    for domain, task_id in jobs:
        result = conformance_json(replay_gold(domain, task_id))
        out = args.out / f"{domain}-{task_id}.json" if args.all else args.out
        write_json(out, result)
        expected = gold.get(domain, {}).get(task_id)
        if expected is not None and expected != result["final_db_hash"]:
            mismatched.append(f"{domain}-{task_id}")
    matched = len(jobs) - len(mismatched)
    print(f"replayed the gold actions of {len(jobs)} task(s) -> {args.out}; "
          f"{matched}/{len(jobs)} final hashes match gold_hashes.json")
    if mismatched:
        print("mismatched: " + ", ".join(mismatched))
        return 1
    return 0


def _export(args: argparse.Namespace) -> int:
    from pipeline.benchmarks.taubench.export import export_tau2
    from pipeline.store.files import NoResultsError
    from pipeline.store.manifest import ManifestError
    from pipeline.store.output_paths import OutputPathError, output_file

    try:
        exported = export_tau2(args.dir, output_file(args.out, "--out"))
    except (NoResultsError, ManifestError, OutputPathError) as exc:
        raise CliError(str(exc)) from None
    for path in exported.paths:
        print(f"wrote {path}")
    for episode in exported.skipped:
        print(f"left out episode {episode}", file=sys.stderr)
    return 0


def add_commands(cli: CliHooks) -> None:
    fetch = cli.add_fetch("taubench", help="τ-bench (tau2-bench v1.0.1): download, verify, derive tools.json")
    fetch.add_argument("--base-url", default=None, help="mirror of the upstream repository at the pinned commit")
    fetch.add_argument("--derived-from", type=Path, default=None, help="folder with derived files (tools.json) to copy")
    fetch.set_defaults(handler=_fetch)

    tau = cli.commands.add_parser("taubench", help="τ-bench conformance tools").add_subparsers(dest="tau_command",
                                                                                              required=True)
    run_calls = tau.add_parser("exec", help="run tool calls on a fresh database")
    run_calls.add_argument("--domain", required=True, choices=["airline", "retail"])
    run_calls.add_argument("--calls", type=Path, required=True, help='CALLS.json: [{"name": ..., "arguments": {...}}]')
    run_calls.add_argument("--out", type=Path, required=True)
    run_calls.set_defaults(handler=_exec)
    replay = tau.add_parser("replay", help="replay a task's gold actions on a fresh database")
    replay.add_argument("--domain", choices=["airline", "retail"], help="default with --all: both domains")
    replay.add_argument("--task", help="task id")
    replay.add_argument("--all", action="store_true", help="every task; --out is then a directory")
    replay.add_argument("--out", type=Path, required=True)
    replay.set_defaults(handler=_replay)

    tau2 = cli.export.add_parser("tau2", help="τ-bench episodes as upstream tau2-bench results JSON")
    tau2.add_argument("dir", type=Path, help="a sweep directory, or a folder of them")
    tau2.add_argument("--out", type=Path, required=True, help="results.json (one file per cell when several)")
    tau2.set_defaults(handler=_export)
