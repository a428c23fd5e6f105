"""The product database for real users: `flowstate data fetch memoryarena --with-shopping-db` against a
local mirror of the Hub's API (the dataset is out of reach here), `check-db` and `make-db`; and the
store held once per node by a Ray actor."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import ray

from pipeline.benchmarks.memoryarena.shopping.checkdb import check_db
from pipeline.benchmarks.memoryarena.shopping.fetch_db import REPO, SOURCE, fetch_product_db
from pipeline.benchmarks.memoryarena.shopping.generate import write_product_db
from pipeline.benchmarks.memoryarena.shopping.productdb import ITEMS, ProductDbError
from pipeline.cli.main import main
from tests.pipeline.benchmarks.memoryarena.conftest import MEMORYARENA
from tests.pipeline.conftest import DATA_DIR

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _git_oid(data: bytes) -> str:
    return hashlib.sha1(f"blob {len(data)}\0".encode() + data).hexdigest()  # noqa: S324 - Git's object id


class HubMirror(BaseHTTPRequestHandler):
    """The Hub's revision, tree (two pages) and resolve endpoints over a folder, and the task files."""

    files: dict[str, bytes] = {}
    served: dict[str, bytes] = {}  # what resolve sends (differs from files to simulate a bad download)

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, body: bytes, status: int = 200, link: str | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        if link:
            self.send_header("Link", link)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        base = f"http://127.0.0.1:{self.server.server_address[1]}"
        if self.path == f"/api/datasets/{REPO}/revision/main":
            return self._send(json.dumps({"sha": COMMIT}).encode())
        tree = f"/api/datasets/{REPO}/tree/{COMMIT}"
        if self.path.startswith(tree):
            entries = [{"type": "directory", "path": "data", "oid": "x", "size": 0}]
            for path, data in sorted(self.files.items()):
                entry = {"type": "file", "path": path, "size": len(data), "oid": _git_oid(data)}
                if path.endswith(ITEMS) or "search_engine" in path:
                    entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 130}
                entries.append(entry)
            half = len(entries) // 2
            if "cursor=2" in self.path:
                return self._send(json.dumps(entries[half:]).encode())
            return self._send(json.dumps(entries[:half]).encode(), link=f'<{base}{tree}?recursive=true&cursor=2>; rel="next"')
        prefix = f"/datasets/{REPO}/resolve/{COMMIT}/"
        if self.path.startswith(prefix) and self.path[len(prefix):] in self.files:
            name = self.path[len(prefix):]
            return self._send(self.served.get(name, self.files[name]))
        task = MEMORYARENA / "examples" / f"{self.path.strip('/').split('/')[0]}.synthetic.jsonl"
        if self.path.endswith("/data.jsonl") and task.is_file():
            return self._send(task.read_bytes())
        self._send(b"not found", 404)


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[tuple[str, type[HubMirror]]]:
    source = tmp_path / "made"
    write_product_db(source, 30, data_dir=DATA_DIR)
    files = {f"data/{p.relative_to(source)}": p.read_bytes() for p in sorted(source.rglob("*")) if p.is_file()}
    files["search_engine/indexes-full/segments_1"] = b"lucene"  # not needed: never fetched
    handler = type("Mirror", (HubMirror,), {"files": files, "served": {}})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()


def test_the_database_is_fetched_checked_and_then_found(hub, tmp_path: Path) -> None:
    url, handler = hub
    report = fetch_product_db(tmp_path / "data", hub=url)
    folder = tmp_path / "data" / "memoryarena" / "product_db"
    assert report.revision == COMMIT and report.folder == folder
    assert len(report.downloaded) == len(handler.files) - 1 and not any("search_engine" in p for p in report.downloaded)
    assert check_db(folder).products == 120  # the store's layout, whatever folder the dataset keeps it in
    record = json.loads((folder / SOURCE).read_text())
    assert record["revision"] == COMMIT and record["files"][ITEMS]["sha256"] == hashlib.sha256(
        handler.files[f"data/{ITEMS}"]).hexdigest()
    again = fetch_product_db(tmp_path / "data", hub=url)
    assert not again.downloaded and len(again.already_present) == len(report.downloaded)


def test_a_download_that_is_not_the_listed_file_is_refused(hub, tmp_path: Path) -> None:
    url, handler = hub
    handler.served[f"data/{ITEMS}"] = b"[]"
    with pytest.raises(ProductDbError, match="not the listed file"):
        fetch_product_db(tmp_path / "data", hub=url)
    assert not (tmp_path / "data" / "memoryarena" / "product_db" / ITEMS).exists()
    assert not list((tmp_path / "data").rglob("*.tmp"))


def test_the_fetch_command_gets_task_files_and_database(hub, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url, _ = hub
    assert main(["data", "fetch", "memoryarena", "--data-dir", str(tmp_path), "--base-url", url,
                 "--accept-new-checksums", "--with-shopping-db", "--hub-url", url]) == 0
    assert f"(commit {COMMIT[:12]})" in capsys.readouterr().out
    assert main(["memoryarena", "check-db", str(tmp_path / "memoryarena" / "product_db")]) == 0
    assert "120 products" in capsys.readouterr().out
    assert main(["data", "fetch", "memoryarena", "--data-dir", str(tmp_path / "x"), "--base-url", url,
                 "--accept-new-checksums", "--with-shopping-db", "--hub-url", "http://127.0.0.1:9"]) == 2


def test_make_db_and_check_db_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memoryarena", "make-db", "--out", str(tmp_path / "db"), "--products", "10"]) == 0
    assert main(["memoryarena", "check-db", str(tmp_path / "db")]) == 0
    out = capsys.readouterr().out
    assert "100 made-up products" in out and "usable" in out and "warning: 100 products" in out
    (tmp_path / "db" / ITEMS).write_text('[{"asin": "B1"}')
    assert main(["memoryarena", "check-db", str(tmp_path / "db")]) == 2
    assert "found the end of the file" in capsys.readouterr().err


@pytest.mark.slow
def test_one_store_per_node_serves_every_episode_actor(ray_local, tmp_path: Path) -> None:
    db = tmp_path / "db"
    write_product_db(db, 20, data_dir=DATA_DIR)
    shoppers = [Shopper.remote(str(db)) for _ in range(3)]
    found = ray.get([s.search.remote("stand mixer") for s in shoppers])
    assert found[0] and found[0] == found[1] == found[2]
    stores = [n for n in ray.util.list_named_actors() if n.startswith("flowstate-shopping-")]
    assert len(stores) == 1
    ray.kill(shoppers[0])  # its creator: the store goes with it; the others start a fresh one on their next call
    assert ray.get(shoppers[1].search.remote("stand mixer")) == found[0]
    for shopper in shoppers[1:]:
        ray.kill(shopper)


@ray.remote(num_cpus=0)
class Shopper:
    """An episode actor's view of the store (the test's stand-in for EpisodeActor)."""

    def __init__(self, db: str) -> None:
        from pipeline.benchmarks.memoryarena.shopping.store import store_for

        self.store = store_for(Path(db))

    async def search(self, keywords: str) -> list[str]:
        return [hit.asin for hit in await self.store.search(keywords)]
