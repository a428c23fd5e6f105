"""fetch_taubench against a local HTTP server that mirrors the upstream repository layout.

The mirror serves the reference data files and, for the tool sources, stand-ins equivalent to
upstream's (written from the reference tools.json, see ``synthetic_tools``): fetch must derive both
tools.json files from them with the pinned checksums.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pipeline.benchmarks.taubench import SHA256, TauBenchDataError, load_tasks, tool_schemas
from pipeline.benchmarks.taubench.data import UPSTREAM_PATHS
from pipeline.benchmarks.taubench.fetch import fetch_taubench

from .conftest import data_dir
from .synthetic_tools import write_sources

SOURCES = ["upstream_src/airline/tools.py", "upstream_src/airline/data_model.py", "upstream_src/retail/tools.py"]
TOOLS_JSON = ["airline/tools.json", "retail/tools.json"]


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        pass


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A folder laid out like the tau2-bench repository, served on 127.0.0.1."""
    root = tmp_path / "mirror"
    for relative, upstream in UPSTREAM_PATHS.items():
        target = root / upstream
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(data_dir() / "taubench" / relative, target)
    for domain in ("airline", "retail"):
        write_sources(data_dir() / "taubench" / domain / "tools.json", root / "src" / "tau2" / "domains" / domain)
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(QuietHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def _tamper_retail_docstring(root: Path) -> None:
    source = root / "src/tau2/domains/retail/tools.py"
    source.write_text(source.read_text().replace("Get the details of a user", "Get a user"))


def test_fetch_downloads_derives_verifies_and_is_idempotent(mirror: tuple[Path, str], tmp_path: Path) -> None:
    _, url = mirror
    destination = tmp_path / "data"
    report = fetch_taubench(destination, base_url=url)
    assert sorted(report.downloaded) == sorted([*UPSTREAM_PATHS, *SOURCES])
    assert report.derived == TOOLS_JSON and report.derived_copied == [] and report.derive_errors == {}
    assert load_tasks("airline", destination) == load_tasks("airline")
    assert tool_schemas("retail", destination) == tool_schemas("retail")  # checked against SHA256 on load
    assert (destination / "taubench/upstream_src/airline/data_model.py").read_text().startswith("from pydantic")

    again = fetch_taubench(destination, base_url=url)
    assert sorted(again.already_present) == sorted([*UPSTREAM_PATHS, *TOOLS_JSON])
    assert again.downloaded == [] and again.derived == []
    assert not [path for path in (destination / "taubench").rglob(".*") if path.is_file()]  # no temp files left


def test_derivation_that_misses_the_checksum_names_file_checksums_and_fallback(
        mirror: tuple[Path, str], tmp_path: Path) -> None:
    root, url = mirror
    _tamper_retail_docstring(root)
    destination = tmp_path / "data"
    with pytest.raises(TauBenchDataError) as caught:
        fetch_taubench(destination, base_url=url)
    message = str(caught.value)
    assert "Could not derive retail/tools.json" in message
    assert f"expected {SHA256['retail/tools.json']}" in message
    assert "has SHA-256 " in message and "derived_from" in message and "--derived-from" in message
    assert not (destination / "taubench/retail/tools.json").exists()
    assert (destination / "taubench/airline/tools.json").is_file()  # derived before retail failed
    assert "Get a user" in (destination / "taubench/upstream_src/retail/tools.py").read_text()  # kept to inspect


def test_failed_derivation_falls_back_to_the_bundle_copy(mirror: tuple[Path, str], tmp_path: Path) -> None:
    root, url = mirror
    _tamper_retail_docstring(root)
    destination = tmp_path / "data"
    report = fetch_taubench(destination, base_url=url, derived_from=data_dir() / "taubench")
    assert report.derived == ["airline/tools.json"] and report.derived_copied == ["retail/tools.json"]
    assert "expected " + SHA256["retail/tools.json"] in report.derive_errors["retail/tools.json"]
    assert tool_schemas("retail", destination) == tool_schemas("retail")


def test_missing_sources_without_fallback_name_the_url_and_the_fallback(
        mirror: tuple[Path, str], tmp_path: Path) -> None:
    root, url = mirror
    shutil.rmtree(root / "src")
    bundle = tmp_path / "bundle"  # a bundle without tools.json is no fallback
    with pytest.raises(TauBenchDataError, match=r"(?s)src/tau2/domains/airline/tools\.py.*Fallback.*missing or not"):
        fetch_taubench(tmp_path / "data", base_url=url, derived_from=bundle)


def test_corrupt_download_is_rejected_and_nothing_is_replaced(mirror: tuple[Path, str], tmp_path: Path) -> None:
    root, url = mirror
    destination = tmp_path / "data"
    fetch_taubench(destination, base_url=url)
    kept = destination / "taubench" / "retail" / "policy.md"
    kept.write_text("locally edited")  # invalid now, so it will be downloaded again
    (root / "data/tau2/domains/retail/policy.md").write_text("tampered upstream")
    with pytest.raises(TauBenchDataError) as caught:
        fetch_taubench(destination, base_url=url)
    assert "retail/policy.md" in str(caught.value) and "expected" in str(caught.value)
    assert kept.read_text() == "locally edited"


def test_unreachable_file_names_the_url(mirror: tuple[Path, str], tmp_path: Path) -> None:
    root, url = mirror
    (root / "LICENSE").unlink()
    with pytest.raises(TauBenchDataError, match="LICENSE"):
        fetch_taubench(tmp_path / "data", base_url=url)
