"""A write the disk refused is the storage's failure, not the episode's.

Retrying an episode on a full disk only burns its attempts and records it as failed. So an
``OSError`` with one of :data:`STORAGE_ERRNOS`, raised in the driver or in an actor, stops the sweep
at once as a :class:`StorageError`: one message naming the path, the errno and what to do; the
episodes in flight are cancelled and nothing is recorded as failed. Every file is written
atomically (:mod:`pipeline.core.atomic`), so nothing half-written is visible, and the same command run
again once the disk is fixed resumes from the finished episodes.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ray.exceptions import RayTaskError

from flowstate.errors import FlowStateError

STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EIO, errno.EROFS, errno.EDQUOT})
_WHAT_TO_DO = {
    errno.ENOSPC: "free space on that filesystem (or pass --out on another one)",
    errno.EDQUOT: "free space within your quota (or raise it)",
    errno.EROFS: "make that filesystem writable again (it is mounted read-only, often after a disk error)",
    errno.EIO: "check the disk (an I/O error: dmesg, the storage's health)",
}


def describe(cause: OSError) -> str:
    """``cannot write <path>: <ERRNO> (<what it means>)``."""
    code = cause.errno if cause.errno is not None else 0
    return (f"cannot write {cause.filename or 'a file of the sweep'}: {errno.errorcode.get(code, code)} "
            f"({os.strerror(code)})")


def remedy(cause: OSError) -> str:
    """What to do about it (lower case, no full stop)."""
    return _WHAT_TO_DO.get(cause.errno or 0, "fix the storage")


class StorageError(FlowStateError):
    """The sweep's storage refused a write (full, read-only, failing): the sweep stopped."""

    def __init__(self, cause: OSError) -> None:
        self.cause = cause
        super().__init__(f"{describe(cause)}. The sweep stopped dispatching: finished episodes are kept and none was "
                         f"recorded as failed. {remedy(cause).capitalize()}, then run the same command again to resume.")


_DUCKDB_ERRNO = re.compile(r'"errno":\s*"(\d+)"')
_DUCKDB_FILE = re.compile(r'file \\?"(.+?)\\?"')


def duckdb_os_error(exc: Exception, path: Path) -> OSError | None:
    """The ``OSError`` behind a DuckDB I/O error (DuckDB reports the errno and file in its message,
    not as an ``OSError``), naming the file it gives or else ``path``; ``None`` without an errno."""
    message = str(exc)
    code = _DUCKDB_ERRNO.search(message)
    if code is None:
        return None
    named = _DUCKDB_FILE.search(message)
    number = int(code.group(1))
    return OSError(number, os.strerror(number), named.group(1) if named else str(path))


def storage_failure(exc: BaseException) -> OSError | None:
    """The storage ``OSError`` behind ``exc`` (itself, a Ray task's cause, or a chained one), if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, RayTaskError):
            current = current.cause
            continue
        if isinstance(current, OSError) and current.errno in STORAGE_ERRNOS:
            return current
        current = current.__cause__ or current.__context__
    return None


@contextmanager
def storage_errors() -> Iterator[None]:
    """Raise a storage failure inside the block as the :class:`StorageError` that says what to do."""
    try:
        yield
    except Exception as exc:
        failure = storage_failure(exc)
        if failure is None:
            raise
        raise StorageError(failure) from exc
