"""What every command handler shares: the user-error type, JSON in/out, and the hooks plug-ins add commands to."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flowstate.errors import FlowStateError
from pipeline.core.atomic import write_json_atomic
from pipeline.core.data import default_data_dir


class CliError(FlowStateError):
    """An error the user can fix; printed as one line without a traceback."""


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically: a crash never leaves a half-written output file."""
    write_json_atomic(path, data)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CliError(f"{path}: file not found") from None
    except json.JSONDecodeError as exc:
        raise CliError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None


@dataclass(frozen=True)
class CliHooks:
    """Where a plug-in adds its commands: ``flowstate <name> ...`` (``commands``), ``flowstate data
    fetch <name>`` (``fetch``, each parser already has ``--data-dir``) and ``flowstate export
    <format>`` (``export``). Handlers are set with ``parser.set_defaults(handler=...)``."""

    commands: Any
    fetch: Any
    export: Any

    def add_fetch(self, name: str, help: str) -> argparse.ArgumentParser:
        parser = self.fetch.add_parser(name, help=help)
        parser.add_argument("--data-dir", type=Path, default=default_data_dir(),
                            help="data directory (default: $FLOWSTATE_DATA or ~/.cache/flowstate/data)")
        return parser
