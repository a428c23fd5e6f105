"""Where the τ-bench data lives and proof that it is the pinned upstream data.

The data files are never part of the repository: they come from a data directory (an explicit
argument or ``$FLOWSTATE_DATA``) whose ``taubench/`` folder holds them. Every file is checked
against the SHA-256 that SOURCE.md records, because a silently different database or task file
would change every score without any visible error.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

from pipeline.core.commands import flowstate_command
from pipeline.core.data import DATA_ENV_VAR, BenchmarkDataError, sha256_file

T = TypeVar("T")
# An explicit data directory (the folder holding taubench/), or None for $FLOWSTATE_DATA.
DataDir = str | os.PathLike[str] | None
Domain = Literal["airline", "retail"]
DOMAINS: tuple[Domain, ...] = ("airline", "retail")

SUBDIR = "taubench"


def fetch_command() -> str:
    """How to fetch the data, as the user can type it."""
    return flowstate_command("data fetch taubench")


UPSTREAM_REPO = "sierra-research/tau2-bench"
UPSTREAM_COMMIT = "fc0055dc4e0a316c3f83133267fbd6faaa770992"

# SHA-256 of every file, as listed in SOURCE.md (facts about the pinned release, not computed here).
SHA256: dict[str, str] = {
    "airline/db.json": "1af9fea6e03ca7ca15a22bb3fcaf3e351393e3fc9070b6777947da8996f7531b",
    "airline/tasks.json": "ccd8ba737b4cc371415af70151187788f728d6108d0916e73bb4317b40542052",
    "airline/policy.md": "10dc0525421521208be39cee235bba84a16e2bcba9899eb93d92cd81d2f62fc4",
    "airline/split_tasks.json": "b22ced4d9a9850ac9aea31c53bdcb6d6009058140bd9acc7db37c1d36222ba8b",
    "airline/tools.json": "81e4aecdf8fb4b2b2c337b6c22637c891b1a08de9d14d3315243e7444ce89b71",
    "retail/db.json": "413a65160adbdb5fde0ffc0015c49b6d70250b10c18128de169b597af7766765",
    "retail/tasks.json": "8e03ebce7901bd6218e7a7dc3105faa9324091a68058f7fe61c65262868812e8",
    "retail/policy.md": "2c9652afbce57d6e087768d37cda64d31c53d50b3e3225cfdb791bac66466467",
    "retail/split_tasks.json": "ed0580ec52575b63fbf76568af42490da6ee7783ecb4aa81af46961291358f20",
    "retail/tools.json": "d3a7c3ec7e5a32b3537a768977073ae41fbb48117b11d7126d9ac623db86549b",
    "user_simulator/simulation_guidelines.md": (
        "740a29dfa64d7bc08eea3bf7493575b914a63f744acbaf7f199ee07eddaf72d3"
    ),
    "LICENSE.tau2-bench": "e67c5aa0074dfcaefd3c3a1aedb94cb539234aecd15d5a972574e3200e6252fe",
}

# Local file -> path in the upstream repository. tools.json is absent: it is derived data.
UPSTREAM_PATHS: dict[str, str] = {
    **{
        f"{domain}/{name}": f"data/tau2/domains/{domain}/{name}"
        for domain in DOMAINS
        for name in ("db.json", "tasks.json", "policy.md", "split_tasks.json")
    },
    "user_simulator/simulation_guidelines.md": "data/tau2/user_simulator/simulation_guidelines.md",
    "LICENSE.tau2-bench": "LICENSE",
}
DERIVED_FILES: tuple[str, ...] = tuple(f"{domain}/tools.json" for domain in DOMAINS)


class TauBenchDataError(BenchmarkDataError):
    """A τ-bench data file is missing, unreadable or not the pinned version."""


def data_root(data_dir: DataDir = None) -> Path:
    """The ``taubench/`` folder under the explicit directory or ``$FLOWSTATE_DATA``."""
    if data_dir is None:
        data_dir = os.environ.get(DATA_ENV_VAR)
        if not data_dir:
            raise TauBenchDataError(
                f"No τ-bench data directory: set {DATA_ENV_VAR} to the folder that holds "
                f"{SUBDIR}/ (or pass data_dir), or run `{fetch_command()}`."
            )
    return _resolved(str(data_dir)) / SUBDIR


@functools.lru_cache(maxsize=256)
def _resolved(data_dir: str) -> Path:
    """Resolved once per process: episodes look their data up many times, and every resolution
    is a system call per path component."""
    return Path(data_dir).expanduser().resolve()


def _fix_hint(relative: str) -> str:
    if relative in DERIVED_FILES:
        return (
            f"{relative} is derived data (not an upstream file): copy it from the FlowState τ-bench "
            f"data bundle into the {SUBDIR}/ folder (or pass derived_from to fetch_taubench), or "
            f"point {DATA_ENV_VAR} at a data directory that has it."
        )
    return f"Set {DATA_ENV_VAR} to the folder that holds {SUBDIR}/, or run `{fetch_command()}`."


# (path, size, mtime_ns) of files whose checksum already matched in this process.
_verified: set[tuple[str, int, int]] = set()


def verified_path(relative: str, data_dir: DataDir = None) -> Path:
    """The path of a data file after checking its SHA-256 (once per process per file version)."""
    return _verified_version(relative, data_dir)[0]


def _verified_version(relative: str, data_dir: DataDir) -> tuple[Path, tuple[str, int, int]]:
    """The verified file's path and version (path, size, mtime): one ``stat`` when already verified."""
    expected = SHA256[relative]
    path = data_root(data_dir) / relative
    try:
        stat = path.stat()
    except OSError as exc:
        raise TauBenchDataError(
            f"τ-bench data file {path} is missing ({exc.strerror}); expected the pinned file with "
            f"SHA-256 {expected}. {_fix_hint(relative)}"
        ) from exc
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _verified:
        actual = sha256_file(path)
        if actual != expected:
            raise TauBenchDataError(
                f"τ-bench data file {path} is corrupt or a different version: SHA-256 {actual}, "
                f"expected {expected}. {_fix_hint(relative)}"
            )
        _verified.add(key)
    return path, key


_parsed: dict[tuple[Callable[[bytes], Any], str, int, int], Any] = {}


def load_parsed(relative: str, parse: Callable[[bytes], T], data_dir: DataDir = None) -> T:
    """``parse(file bytes)`` of a verified data file, computed once per process per file version."""
    path, version = _verified_version(relative, data_dir)
    key = (parse, *version)
    if key not in _parsed:
        _parsed[key] = parse(path.read_bytes())
    return _parsed[key]
