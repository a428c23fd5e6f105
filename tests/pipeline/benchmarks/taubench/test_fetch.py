"""fetch_taubench against a local HTTP server that mirrors the upstream repository layout."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pipeline.benchmarks.taubench import TauBenchDataError, fetch_taubench, load_tasks, tool_schemas
from pipeline.benchmarks.taubench.data import UPSTREAM_PATHS

from .conftest import data_dir


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
        source = root / "src" / "tau2" / "domains" / domain / "tools.py"
        source.parent.mkdir(parents=True)
        source.write_text(f'"""{domain} tools (stand-in)."""\n')
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(QuietHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_fetch_downloads_verifies_and_is_idempotent(mirror: tuple[Path, str], tmp_path: Path) -> None:
    _, url = mirror
    destination = tmp_path / "data"
    report = fetch_taubench(destination, base_url=url)
    assert sorted(report.downloaded) == sorted([*UPSTREAM_PATHS, "upstream_src/airline/tools.py",
                                                "upstream_src/retail/tools.py"])
    assert report.missing_derived == ["airline/tools.json", "retail/tools.json"]
    assert load_tasks("airline", destination) == load_tasks("airline")
    with pytest.raises(TauBenchDataError, match="derived data"):
        tool_schemas("airline", destination)

    again = fetch_taubench(destination, base_url=url, derived_from=data_dir() / "taubench")
    assert sorted(again.already_present) == sorted(UPSTREAM_PATHS)
    assert again.derived_copied == ["airline/tools.json", "retail/tools.json"] and again.missing_derived == []
    assert tool_schemas("retail", destination) == tool_schemas("retail")
    assert (destination / "taubench" / "upstream_src" / "retail" / "tools.py").read_text().startswith('"""retail')
    assert not [path for path in (destination / "taubench").rglob(".*") if path.is_file()]  # no temp files left


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
