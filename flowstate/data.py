"""The data directory (``$FLOWSTATE_DATA``): benchmark files, and the released prompts some methods
read at run time (``methods/<name>/``). Never part of the repository.

A method that reads released prompts declares where they come from (:class:`PromptRelease`: a public
repository at a pinned commit, each prompt a string literal of one of its files, with its SHA-256);
the method reads them through its release, and ``flowstate data fetch methods`` fetches every
registered method's release. The pins live once, with the method.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
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


@dataclass(frozen=True)
class ReleasedLiteral:
    """One released prompt: a string literal of a repository file, written to ``out``."""

    out: str  # file name under methods/<method>/
    source: str  # path in the repository
    name: str  # a module-level variable, or Class.method.variable for an f-string in a method
    sha256: str


@dataclass(frozen=True)
class PromptRelease:
    """Where a method's released prompts come from, pinned."""

    method: str  # the folder under methods/
    repo: str  # owner/name on GitHub
    commit: str
    literals: tuple[ReleasedLiteral, ...]
    licence: str = "LICENSE"  # its path in the repository
    # The licence's pinned SHA-256; None where the copy in the data directory was never compared
    # with the repository's own (then the fetched licence is written and its hash reported).
    licence_sha256: str | None = None

    def read(self, out: str, data_dir: Path | None = None, what: str = "") -> str:
        """One released prompt, checked against its pinned SHA-256."""
        sha256 = next(lit.sha256 for lit in self.literals if lit.out == out)
        return read_method_file(self.method, out, sha256, data_dir, what=what)
