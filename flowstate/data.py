"""The data directory (``$FLOWSTATE_DATA``): benchmark files, and the released prompts some methods
read at run time (``methods/<name>/``). Never part of the repository."""

from __future__ import annotations

import os
from pathlib import Path

DATA_ENV_VAR = "FLOWSTATE_DATA"


def default_data_dir() -> Path:
    """``$FLOWSTATE_DATA``, else ``~/.cache/flowstate/data`` (where ``flowstate data fetch`` puts data)."""
    return Path(os.environ.get(DATA_ENV_VAR) or Path.home() / ".cache" / "flowstate" / "data")
