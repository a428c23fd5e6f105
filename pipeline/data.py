"""The data directory every benchmark reads from (``$FLOWSTATE_DATA``; never part of the repository)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from flowstate.data import DATA_ENV_VAR, default_data_dir

__all__ = ["DATA_ENV_VAR", "BenchmarkDataError", "default_data_dir", "download", "sha256_file"]


class BenchmarkDataError(RuntimeError):
    """A benchmark's data is missing, unreadable or not the pinned version (the message says how to fix it)."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download(url: str, timeout: float, error: type[BenchmarkDataError] = BenchmarkDataError) -> bytes:
    """The bytes at ``url`` (a fixed https/http base, or a local mirror); ``error`` when unreachable."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - fixed base URLs
            return response.read()
    except (urllib.error.URLError, OSError) as exc:
        raise error(f"Could not download {url}: {exc}") from exc
