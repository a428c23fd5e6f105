"""`flowstate data fetch memoryarena` against a local HTTP mirror of the dataset's layout (the real files
are out of reach here: the mirror serves the synthetic examples as the four configs)."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from functools import partial
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from pipeline.benchmarks.memoryarena import data as data_module
from pipeline.benchmarks.memoryarena.data import ACCEPTED_CHECKSUMS, CONFIGS, MemoryArenaDataError, load_tasks
from pipeline.benchmarks.memoryarena.fetch import fetch_memoryarena
from pipeline.cli.main import main
from tests.pipeline.benchmarks.memoryarena.conftest import MEMORYARENA
from tests.pipeline.benchmarks.taubench.test_fetch import QuietHandler


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    root = tmp_path / "mirror"
    sums = {}
    for config in CONFIGS:
        body = (MEMORYARENA / "examples" / f"{config}.synthetic.jsonl").read_bytes()
        (root / config).mkdir(parents=True)
        (root / config / "data.jsonl").write_bytes(body)
        sums[config] = hashlib.sha256(body).hexdigest()
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(QuietHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", sums
    finally:
        server.shutdown()


def test_files_matching_the_pinned_checksums_are_fetched_and_then_found(mirror, tmp_path, monkeypatch) -> None:
    url, sums = mirror
    monkeypatch.setattr(data_module, "HF_SHA256", sums)
    monkeypatch.setattr("pipeline.benchmarks.memoryarena.fetch.HF_SHA256", sums)
    report = fetch_memoryarena(tmp_path / "data", base_url=url)
    assert report.downloaded == list(CONFIGS) and not report.accepted
    assert [t.id for t in load_tasks(tmp_path / "data" / "memoryarena" / "formal_reasoning_phys" / "data.jsonl",
                                     "formal_reasoning_phys")] == [950, 951, 952]
    again = fetch_memoryarena(tmp_path / "data", base_url=url)
    assert again.already_present == list(CONFIGS) and not again.downloaded


def test_a_checksum_mismatch_is_refused_plainly_unless_accepted(mirror, tmp_path, capsys) -> None:
    url, sums = mirror
    with pytest.raises(MemoryArenaDataError, match="pinned values come from third parties.*--accept-new-checksums"):
        fetch_memoryarena(tmp_path / "data", base_url=url)
    assert not (tmp_path / "data" / "memoryarena" / "bundled_shopping").exists()  # nothing written
    assert main(["data", "fetch", "memoryarena", "--data-dir", str(tmp_path / "data"), "--base-url", url,
                 "--accept-new-checksums"]) == 0
    assert "accepted a new SHA-256" in capsys.readouterr().out
    recorded = json.loads((tmp_path / "data" / "memoryarena" / ACCEPTED_CHECKSUMS).read_text())
    assert recorded == sums
    # the accepted values are now the expected ones: a plain fetch finds the files valid
    assert fetch_memoryarena(tmp_path / "data", base_url=url).already_present == list(CONFIGS)


def test_an_unreachable_mirror_is_a_clear_error(tmp_path) -> None:
    assert main(["data", "fetch", "memoryarena", "--data-dir", str(tmp_path), "--base-url", "http://127.0.0.1:9"]) == 2
