"""Download the pinned upstream τ-bench files into a data directory (``flowstate data fetch``).

Every upstream file is fetched from the tau2-bench repository at the pinned commit, checked
against its SOURCE.md checksum and written atomically. ``tools.json`` is not an upstream file:
upstream generates those schemas at run time from its tool sources, so we download the domain's
``tools.py`` (and the argument models it imports), rebuild ``tools.json`` from them by parsing
(:mod:`pipeline.benchmarks.taubench.schema_derivation`) and accept it only if it has the pinned
checksum. The sources are kept under ``upstream_src/<domain>/`` for provenance. When the derivation
fails, a copy from a FlowState data bundle (``derived_from``) is the fallback.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from pipeline.benchmarks.taubench.data import (
    DOMAINS,
    SHA256,
    SUBDIR,
    UPSTREAM_COMMIT,
    UPSTREAM_PATHS,
    UPSTREAM_REPO,
    TauBenchDataError,
    fetch_command,
    sha256_file,
)
from pipeline.benchmarks.taubench.schema_derivation import derive_tools_json
from pipeline.core.atomic import write_bytes_atomic
from pipeline.core.data import download

DEFAULT_BASE_URL = f"https://raw.githubusercontent.com/{UPSTREAM_REPO}/{UPSTREAM_COMMIT}"
SOURCES_DIR = "upstream_src"  # <domain>/<file>: the upstream tool sources each tools.json was derived from


class FetchReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    root: str
    downloaded: list[str]
    already_present: list[str]
    # tools.json rebuilt from the upstream tool sources.
    derived: list[str]
    # tools.json copied from ``derived_from`` because the derivation failed; why, per file, in derive_errors.
    derived_copied: list[str]
    derive_errors: dict[str, str]


def _download(url: str, timeout: float) -> bytes:
    return download(url, timeout, TauBenchDataError)


def _is_valid(path: Path, relative: str) -> bool:
    return path.is_file() and sha256_file(path) == SHA256[relative]


def _derive(domain: str, root: Path, base: str, timeout: float, report: FetchReport) -> bytes:
    """``<domain>/tools.json`` rebuilt from the downloaded sources, checked against its pinned checksum."""
    relative = f"{domain}/tools.json"
    package_url = f"{base}/src/tau2/domains/{domain}"
    downloaded: dict[str, bytes] = {}

    def read_source(file: str) -> str:
        downloaded[file] = _download(f"{package_url}/{file}", timeout)
        try:
            return downloaded[file].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TauBenchDataError(f"{package_url}/{file} is not UTF-8 text: {exc}") from exc

    try:
        data = derive_tools_json(domain, read_source)
    finally:  # kept even when the derivation fails, to show what it was derived from
        for file, source in downloaded.items():
            write_bytes_atomic(root / SOURCES_DIR / domain / file, source, fsync=True)
            report.downloaded.append(f"{SOURCES_DIR}/{domain}/{file}")
    actual = hashlib.sha256(data).hexdigest()
    if actual != SHA256[relative]:
        raise TauBenchDataError(
            f"{relative} derived from the upstream sources in {package_url}/ (kept in "
            f"{root / SOURCES_DIR / domain}) has SHA-256 {actual}, expected {SHA256[relative]}: upstream's tool "
            "sources changed, or its schema generation does not follow the rules this parser reproduces."
        )
    return data


def fetch_taubench(
    data_dir: str | os.PathLike[str],
    base_url: str = DEFAULT_BASE_URL,
    *,
    derived_from: str | os.PathLike[str] | None = None,
    timeout: float = 60.0,
) -> FetchReport:
    """Fill ``data_dir/taubench/`` with the pinned files; files already valid are kept.

    ``derived_from`` is a folder laid out like ``taubench/`` holding the two ``tools.json``; it is
    used only for a ``tools.json`` whose derivation fails. A download or derivation that does not
    match its checksum (with no valid fallback) raises :class:`TauBenchDataError` and leaves the
    existing file untouched.
    """
    root = Path(data_dir).expanduser().resolve() / SUBDIR
    base = base_url.rstrip("/")
    report = FetchReport(root=str(root), downloaded=[], already_present=[], derived=[], derived_copied=[],
                         derive_errors={})
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
        write_bytes_atomic(target, data, fsync=True)
        report.downloaded.append(relative)
    for domain in DOMAINS:
        relative = f"{domain}/tools.json"
        target = root / relative
        if _is_valid(target, relative):
            report.already_present.append(relative)
            continue
        try:
            data = _derive(domain, root, base, timeout, report)
            report.derived.append(relative)
        except TauBenchDataError as exc:
            fallback = Path(derived_from) / relative if derived_from is not None else None
            if fallback is None or not _is_valid(fallback, relative):
                found = "" if fallback is None else f" ({fallback} is missing or not the pinned file)"
                raise TauBenchDataError(
                    f"Could not derive {relative}: {exc}\nFallback: copy tools.json from a FlowState τ-bench data "
                    f"bundle with derived_from=FOLDER (`{fetch_command()} --derived-from FOLDER`), FOLDER "
                    f"holding {relative}{found}."
                ) from exc
            data = fallback.read_bytes()
            report.derived_copied.append(relative)
            report.derive_errors[relative] = str(exc)
        write_bytes_atomic(target, data, fsync=True)
    return report
