"""The data directory every benchmark reads from (``$FLOWSTATE_DATA``; never part of the repository)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flowstate.data import DATA_ENV_VAR, default_data_dir
from flowstate.errors import FlowStateError
from pipeline.core.atomic import write_bytes_atomic, write_text_atomic

__all__ = ["CACHE_ENV_VAR", "DATA_ENV_VAR", "BenchmarkDataError", "cache_root", "cached_json", "default_data_dir",
           "download", "sha256_file"]

CACHE_ENV_VAR = "FLOWSTATE_CACHE"


class BenchmarkDataError(FlowStateError, RuntimeError):
    """A benchmark's data is missing, unreadable or not the pinned version (the message says how to fix it)."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def cache_root() -> Path:
    """This machine's cache of what is derived from the data (never beside the data itself)."""
    return Path(os.environ.get(CACHE_ENV_VAR) or Path.home() / ".cache" / "flowstate")


def cached_json(folder: str, key: str, build: Callable[[], Any]) -> Any:
    """``build()``, kept as JSON in ``cache_root()/folder/key.json`` with its SHA-256 beside it, so that
    the other processes of the machine read it instead of building it again. ``key`` must name all
    that the value depends on. A cache that is missing, damaged or fails its checksum is built
    again; a value JSON cannot hold exactly, or a cache that cannot be written, is just returned."""
    path = cache_root() / folder / f"{key}.json"
    checksum = path.with_suffix(".sha256")
    try:
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() == checksum.read_text().strip():
            return json.loads(data)
    except (OSError, ValueError):
        pass
    value = build()
    data = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    if json.loads(data) != value:
        return value
    try:
        write_bytes_atomic(path, data)  # the checksum last: a cache cut short between the two fails it
        write_text_atomic(checksum, hashlib.sha256(data).hexdigest())
    except OSError:
        pass
    return value


def download(url: str, timeout: float, error: type[BenchmarkDataError] = BenchmarkDataError) -> bytes:
    """The bytes at ``url`` (a fixed https/http base, or a local mirror); ``error`` when unreachable."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - fixed base URLs
            return response.read()
    except (urllib.error.URLError, OSError) as exc:
        raise error(f"Could not download {url}: {exc}") from exc
