"""Files that appear whole or not at all: written under a hidden temporary name in the same folder,
then renamed into place (readers see the old file or the complete new one; a crash leaves no half
file where a reader looks)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def write_atomic(path: Path, write: Callable[[Path], None], *, fsync: bool = False,
                 before_rename: Callable[[Path], None] | None = None) -> None:
    """``write(temporary)`` then rename it to ``path``; the temporary is removed if anything fails.

    ``fsync``: flush the file to disk before the rename (for data that must survive a power loss).
    ``before_rename(temporary)``: runs on the complete file before it becomes visible (to account for it).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(descriptor)
    temporary = Path(name)
    try:
        write(temporary)
        if fsync:
            with temporary.open("rb") as handle:
                os.fsync(handle.fileno())
        if before_rename is not None:
            before_rename(temporary)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_bytes_atomic(path: Path, data: bytes, *, fsync: bool = False) -> None:
    write_atomic(path, lambda tmp: tmp.write_bytes(data), fsync=fsync)


def write_text_atomic(path: Path, text: str) -> None:
    write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_json_atomic(path: Path, data: Any, *, indent: int = 2) -> None:
    write_text_atomic(path, json.dumps(data, indent=indent, ensure_ascii=False, default=str) + "\n")
