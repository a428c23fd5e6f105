"""`flowstate ...`: the command line. Each subcommand is a small function; errors print one clear line."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError


class CliError(Exception):
    """An error the user can fix; printed without a traceback."""


def _write_json(path: Path, data: Any) -> None:
    """Write JSON atomically: a crash never leaves a half-written output file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CliError(f"{path}: file not found") from None
    except json.JSONDecodeError as exc:
        raise CliError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None


# -- trace -------------------------------------------------------------------------------------
def _trace_replay(args: argparse.Namespace) -> int:
    from flowstate.trace import TraceError, replay_trace

    data = _read_json(args.trace)
    try:
        result = replay_trace(data)
    except ValidationError as exc:
        raise CliError(f"{args.trace}: not a valid trace:\n{exc}") from None
    except TraceError as exc:
        raise CliError(f"{args.trace}: {exc}") from None
    _write_json(args.out, result)
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="flowstate", description="FlowState experiments: run, inspect and analyse.")
    commands = parser.add_subparsers(dest="command", required=True)

    trace = commands.add_parser("trace", help="work with recorded model outputs").add_subparsers(dest="trace_command", required=True)
    replay = trace.add_parser("replay", help="run the FlowState runtime over a recorded trace (no model, no environment)")
    replay.add_argument("trace", type=Path, help="TRACE.json: requests with completions and observations")
    replay.add_argument("--out", type=Path, required=True, help="where to write the replay result (JSON)")
    replay.set_defaults(handler=_trace_replay)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except CliError as exc:
        print(f"flowstate: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("flowstate: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
