"""What every command handler shares: the user-error type and JSON in/out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class CliError(Exception):
    """An error the user can fix; printed as one line without a traceback."""


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically: a crash never leaves a half-written output file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CliError(f"{path}: file not found") from None
    except json.JSONDecodeError as exc:
        raise CliError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
