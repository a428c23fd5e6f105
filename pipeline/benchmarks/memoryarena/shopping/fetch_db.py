"""`flowstate data fetch memoryarena --with-shopping-db`: MemoryArena's product database from Hugging Face.

The dataset ``ai-hyz/MemoryArena-product-db`` has no published revision or checksums, so the fetch
pins what it finds: it resolves the branch to a commit, lists that commit's files with the Hub's tree
API, and checks every download against the listing (Git LFS files by their SHA-256, small files by
their Git blob id). Only what the store and the grader read is fetched (``items_shuffle.json``,
``items_ins_v2.json``, ``domain_data.json``, ``product_catalog/``); the Lucene index is not needed.
Files stream to disk (the products file is several GB) and appear only once checked; a rerun skips
the files already there and verified; ``SOURCE.json`` records the commit and every file's SHA-256.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from pipeline.benchmarks.memoryarena.shopping.productdb import ATTRIBUTES, CATALOG_DIR, DOMAIN, ITEMS, ProductDbError
from pipeline.core.atomic import write_atomic, write_json_atomic
from pipeline.core.data import sha256_file

REPO = "ai-hyz/MemoryArena-product-db"
HUB = "https://huggingface.co"
SOURCE = "SOURCE.json"
_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')


class RemoteFile(BaseModel):
    model_config = ConfigDict(extra="ignore")

    path: str
    size: int
    sha256: str | None = None  # Git LFS files
    git_oid: str | None = None  # the Git blob id (SHA-1 of "blob <size>\0" + content)


class DbFetchReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    folder: Path
    revision: str
    downloaded: list[str] = []
    already_present: list[str] = []
    bytes: int = 0


def wanted(path: str) -> bool:
    """The files the store and the grader read (wherever the dataset nests them)."""
    name = path.rsplit("/", 1)[-1]
    return name in (ITEMS, ATTRIBUTES, DOMAIN) or (f"{CATALOG_DIR}/" in f"/{path}" and name.endswith(".json"))


def _get_json(url: str, timeout: float) -> tuple[Any, str | None]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - the Hub or a mirror
            link = response.headers.get("Link") or ""
            found = _NEXT.search(link)
            return json.loads(response.read()), found.group(1) if found else None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ProductDbError(f"Could not read {url}: {exc}") from exc


def remote_files(hub: str, revision: str, timeout: float) -> tuple[str, list[RemoteFile]]:
    """The commit the revision names, and the files of that commit that the store needs."""
    info, _ = _get_json(f"{hub}/api/datasets/{REPO}/revision/{revision}", timeout)
    commit = info.get("sha") if isinstance(info, dict) else None
    if not isinstance(commit, str) or not commit:
        raise ProductDbError(f"{hub}: no commit for {REPO}@{revision}")
    files: list[RemoteFile] = []
    url: str | None = f"{hub}/api/datasets/{REPO}/tree/{commit}?recursive=true"
    while url:
        entries, url = _get_json(url, timeout)
        for entry in entries if isinstance(entries, list) else []:
            if entry.get("type") != "file" or not wanted(str(entry.get("path", ""))):
                continue
            lfs = entry.get("lfs") or {}
            files.append(RemoteFile(path=entry["path"], size=int(lfs.get("size", entry.get("size", 0))),
                                    sha256=lfs.get("oid"), git_oid=None if lfs else entry.get("oid")))
    names = {f.path.rsplit("/", 1)[-1] for f in files}
    missing = [n for n in (ITEMS, ATTRIBUTES, DOMAIN) if n not in names]
    if missing or not any(f"{CATALOG_DIR}/" in f"/{f.path}" for f in files):
        raise ProductDbError(f"{REPO}@{commit[:12]} lacks {', '.join(missing) or CATALOG_DIR + '/'}: not the product "
                             "database this store reads")
    return commit, files


def _local_path(folder: Path, remote: RemoteFile) -> Path:
    """Where a file goes: the store's layout, whatever folder the dataset keeps it in."""
    if f"{CATALOG_DIR}/" in f"/{remote.path}":
        return folder / CATALOG_DIR / remote.path.rsplit("/", 1)[-1]
    return folder / remote.path.rsplit("/", 1)[-1]


def _matches(path: Path, remote: RemoteFile, *, cached: bool = False) -> bool:
    """``cached``: a file already in place is hashed once per version (a rerun skips several GB)."""
    if not path.is_file() or path.stat().st_size != remote.size:
        return False
    if remote.sha256:
        from pipeline.benchmarks.memoryarena.shopping.store import cached_sha256

        return (cached_sha256(path) if cached else sha256_file(path)) == remote.sha256
    return _git_oid(path) == remote.git_oid


def _git_oid(path: Path) -> str:
    digest = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())  # noqa: S324 - Git's object id, not security
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _download(url: str, target: Path, remote: RemoteFile, timeout: float) -> None:
    def write(temporary: Path) -> None:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response, temporary.open("wb") as out:  # noqa: S310
                for block in iter(lambda: response.read(1 << 20), b""):
                    out.write(block)
        except (urllib.error.URLError, OSError) as exc:
            raise ProductDbError(f"Could not download {url}: {exc}") from exc
        if not _matches(temporary, remote):
            what = f"SHA-256 {remote.sha256}" if remote.sha256 else f"Git blob {remote.git_oid}"
            raise ProductDbError(f"{url}: the download is not the listed file ({remote.size} bytes, {what}); "
                                 "nothing was written")

    write_atomic(target, write, fsync=True)


def fetch_product_db(data_dir: str | os.PathLike[str], *, hub: str = HUB, revision: str = "main",
                     timeout: float = 600.0) -> DbFetchReport:
    from pipeline.benchmarks.memoryarena.data import SUBDIR

    folder = Path(data_dir).expanduser().resolve() / SUBDIR / "product_db"
    hub = hub.rstrip("/")
    commit, files = remote_files(hub, revision, timeout)
    report = DbFetchReport(folder=folder, revision=commit)
    record: dict[str, Any] = {"repo": REPO, "revision": commit, "files": {}}
    for remote in files:
        target = _local_path(folder, remote)
        if _matches(target, remote, cached=True):
            report.already_present.append(remote.path)
        else:
            _download(f"{hub}/datasets/{REPO}/resolve/{commit}/{remote.path}", target, remote, timeout)
            report.downloaded.append(remote.path)
            report.bytes += remote.size
        record["files"][str(target.relative_to(folder))] = {"source": remote.path, "size": remote.size,
                                                           "sha256": remote.sha256 or sha256_file(target)}
    write_json_atomic(folder / SOURCE, record)
    return report
