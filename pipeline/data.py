"""The data directory every benchmark reads from (``$FLOWSTATE_DATA``; never part of the repository)."""

from __future__ import annotations

import os
from pathlib import Path

DATA_ENV_VAR = "FLOWSTATE_DATA"


class BenchmarkDataError(RuntimeError):
    """A benchmark's data is missing, unreadable or not the pinned version (the message says how to fix it)."""


def default_data_dir() -> Path:
    """Where fetched data goes: ``$FLOWSTATE_DATA``, else ``~/.cache/flowstate/data``."""
    return Path(os.environ.get(DATA_ENV_VAR) or Path.home() / ".cache" / "flowstate" / "data")
