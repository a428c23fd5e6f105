"""Download the pinned upstream τ-bench files into a data directory (``flowstate data fetch``).

Every upstream file is fetched from the tau2-bench repository at the pinned commit, checked
against its SOURCE.md checksum and written atomically. ``tools.json`` is not an upstream file:
upstream generates those schemas at run time from the tool methods' signatures and docstrings
(and the argument models' field descriptions) with its pinned pydantic. Re-deriving them
byte-for-byte cannot be verified without the upstream sources at that commit, so we do not
derive them: the two domains' ``tools.py`` are downloaded next to the data for provenance, and
the ``tools.json`` files must come with the FlowState data bundle (``derived_from``), checked
against their pinned checksums like everything else.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from pipeline.benchmarks.taubench.data import (
    DERIVED_FILES,
    DOMAINS,
    SHA256,
    SUBDIR,
    UPSTREAM_COMMIT,
    UPSTREAM_PATHS,
    UPSTREAM_REPO,
    TauBenchDataError,
    sha256_file,
)

DEFAULT_BASE_URL = f"https://raw.githubusercontent.com/{UPSTREAM_REPO}/{UPSTREAM_COMMIT}"
# Upstream sources of the derived tools.json (kept for provenance; no pinned checksum exists).
TOOL_SOURCES = {f"upstream_src/{domain}/tools.py": f"src/tau2/domains/{domain}/tools.py" for domain in DOMAINS}


class FetchReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    root: str
    downloaded: list[str]
    already_present: list[str]
    derived_copied: list[str]
    # Derived files still missing: copy them from the data bundle before running the benchmark.
    missing_derived: list[str]


def _download(url: str, timeout: float) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - fixed https/http base
            return response.read()
    except (urllib.error.URLError, OSError) as exc:
        raise TauBenchDataError(f"Could not download {url}: {exc}") from exc


def _write_atomically(target: Path, data: bytes) -> None:
    """Readers see the old file or the complete new one, never a partial download."""
    target.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _is_valid(path: Path, relative: str) -> bool:
    return path.is_file() and sha256_file(path) == SHA256[relative]


def fetch_taubench(
    data_dir: str | os.PathLike[str],
    base_url: str = DEFAULT_BASE_URL,
    *,
    derived_from: str | os.PathLike[str] | None = None,
    timeout: float = 60.0,
) -> FetchReport:
    """Fill ``data_dir/taubench/`` with the pinned files; files already valid are kept.

    ``derived_from`` is a folder laid out like ``taubench/`` holding the two ``tools.json``.
    A download that does not match its checksum raises :class:`TauBenchDataError` and leaves the
    existing file untouched.
    """
    root = Path(data_dir).expanduser().resolve() / SUBDIR
    base = base_url.rstrip("/")
    report = FetchReport(root=str(root), downloaded=[], already_present=[], derived_copied=[], missing_derived=[])
    for relative, upstream_path in UPSTREAM_PATHS.items():
        target = root / relative
        if _is_valid(target, relative):
            report.already_present.append(relative)
            continue
        url = f"{base}/{upstream_path}"
        data = _download(url, timeout)
        actual = hashlib.sha256(data).hexdigest()
        if actual != SHA256[relative]:
            raise TauBenchDataError(
                f"Downloaded {url} (for {relative}) has SHA-256 {actual}, expected {SHA256[relative]}: "
                f"the server does not hold the pinned tau2-bench commit {UPSTREAM_COMMIT}."
            )
        _write_atomically(target, data)
        report.downloaded.append(relative)
    for relative, upstream_path in TOOL_SOURCES.items():
        _write_atomically(root / relative, _download(f"{base}/{upstream_path}", timeout))
        report.downloaded.append(relative)
    for relative in DERIVED_FILES:
        target = root / relative
        source = Path(derived_from) / relative if derived_from is not None else None
        if _is_valid(target, relative):
            report.already_present.append(relative)
        elif source is not None and _is_valid(source, relative):
            _write_atomically(target, source.read_bytes())
            report.derived_copied.append(relative)
        else:
            report.missing_derived.append(relative)
    return report
