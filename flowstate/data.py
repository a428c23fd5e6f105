"""The data directory (``$FLOWSTATE_DATA``): benchmark files, and the released prompts some methods
read at run time (``methods/<name>/``). Never part of the repository."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from flowstate.errors import FlowStateError

DATA_ENV_VAR = "FLOWSTATE_DATA"


def default_data_dir() -> Path:
    """``$FLOWSTATE_DATA``, else ``~/.cache/flowstate/data`` (where ``flowstate data fetch`` puts data)."""
    return Path(os.environ.get(DATA_ENV_VAR) or Path.home() / ".cache" / "flowstate" / "data")


class MethodDataError(FlowStateError, RuntimeError):
    """A released prompt a method reads is missing, or is not the pinned one."""


def read_method_file(method: str, name: str, sha256: str, data_dir: Path | None = None, what: str = "") -> str:
    """``<data dir>/methods/<method>/<name>``, checked against its pinned SHA-256."""
    path = (data_dir or default_data_dir()) / "methods" / method / name
    what = what or method
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise MethodDataError(f"{what}'s prompt {path} is missing ({exc.strerror}): run `flowstate data fetch "
                              f"methods`, or set {DATA_ENV_VAR} to the folder that holds methods/{method}/") from None
    if hashlib.sha256(data).hexdigest() != sha256:
        raise MethodDataError(f"{path} is not the pinned {what} prompt (its SHA-256 differs)")
    return data.decode("utf-8")
