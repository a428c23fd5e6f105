"""Files that appear whole or not at all: written under a hidden temporary name in the same folder,
then renamed into place (readers see the old file or the complete new one; a crash leaves no half
file where a reader looks). A write that fails names its file (``os.write`` does not), and the
test hook ``FLOWSTATE_FAULT_WRITE`` (:mod:`pipeline.core.fault_injection`) makes chosen writes fail here."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pipeline.core.fault_injection import check_write

TEMPORARY_SUFFIX = ".tmp"
# Every temporary of this module (``.<name>.<random>.tmp``): what a killed writer leaves behind.
TEMPORARY_GLOB = f".*{TEMPORARY_SUFFIX}"


@contextmanager
def _staged(path: Path, before_rename: Callable[[Path], None] | None) -> Iterator[tuple[int, Path]]:
    """A fresh hidden temporary beside ``path`` (its open descriptor and its name), renamed to
    ``path`` when the block ends well and removed when it does not; the caller closes the descriptor."""
    try:
        try:
            descriptor, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMPORARY_SUFFIX)
        except FileNotFoundError:  # the folder's first file (creating it up front costs a call per write)
            path.parent.mkdir(parents=True, exist_ok=True)
            descriptor, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMPORARY_SUFFIX)
    except OSError as exc:  # a read-only or full folder: name the file that was to be written
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    temporary = Path(name)
    try:
        yield descriptor, temporary
        check_write(path)
        if before_rename is not None:
            before_rename(temporary)
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        if exc.filename is None and exc.errno is not None:
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_atomic(path: Path, write: Callable[[Path], None], *, fsync: bool = False,
                 before_rename: Callable[[Path], None] | None = None) -> None:
    """``write(temporary)`` then rename it to ``path``; the temporary is removed if anything fails.

    ``fsync``: flush the file to disk before the rename (for data that must survive a power loss).
    ``before_rename(temporary)``: runs on the complete file before it becomes visible (to account for it).
    """
    with _staged(path, before_rename) as (descriptor, temporary):
        os.close(descriptor)
        write(temporary)
        if fsync:
            with temporary.open("rb") as handle:
                os.fsync(handle.fileno())


def write_bytes_atomic(path: Path, data: bytes | memoryview, *, fsync: bool = False,
                       before_rename: Callable[[Path], None] | None = None) -> None:
    """``data`` as the whole of ``path``, written through the temporary's own descriptor (one open)."""
    with _staged(path, before_rename) as (descriptor, _):
        try:
            _write_all(descriptor, data)
            if fsync:
                os.fsync(descriptor)
        finally:
            os.close(descriptor)


def _write_all(descriptor: int, data: bytes | memoryview) -> None:
    """``os.write`` until every byte is out (it may write fewer than asked)."""
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view):]


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: Path, data: Any, *, indent: int = 2) -> None:
    write_text_atomic(path, json.dumps(data, indent=indent, ensure_ascii=False, default=str) + "\n")
