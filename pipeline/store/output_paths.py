"""Where a command writes: an ``--out`` is checked before any work, and a write the filesystem
refuses is described in one line, so that neither ends in a traceback (nor a device such as
``/dev/null`` is replaced by a file)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from flowstate.errors import FlowStateError
from pipeline.store.files import is_sweep_dir

# Refusals of the environment, not faults of the program: told to the user in one line (exit 2).
REFUSED = frozenset({errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.ENOTDIR,
                     errno.EISDIR, errno.ENAMETOOLONG})
_WHAT_TO_DO = {
    errno.EACCES: "no permission to write there",
    errno.EPERM: "no permission to write there",
    errno.ENOSPC: "free space on that filesystem",
    errno.EDQUOT: "free space within your quota",
    errno.EIO: "check the disk (an I/O error)",
}
READ_ONLY_FOLDERS = ("`compact`, `track`, `grade` and `run` write into a sweep's folder and beside it (its claim); "
                     "`query`, `show`, `verify` and `report --out FILE` elsewhere only read it")


class OutputPathError(FlowStateError, ValueError):
    """An ``--out`` that cannot be what the command writes (a folder, a file)."""


def _kind(path: Path) -> str:
    mode = path.stat().st_mode
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISREG(mode):
        return "a file"
    return "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a pipe or socket"


def _unmakeable(path: Path, make: bool) -> str | None:
    """Why ``path`` can be no folder: an ancestor that is no folder, or what making it (``make``) says."""
    ancestor = next((p for p in (path, *path.parents) if p.exists()), None)
    if ancestor is not None and not ancestor.is_dir():
        return f"{ancestor} is {_kind(ancestor)}, not a folder"
    try:
        if make:
            path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def output_folder(path: Path, option: str, *, make: bool = True) -> Path:
    """A folder to write sweeps into: one that exists, else is made now (``make``); not a sweep's own."""
    why = _unmakeable(Path(path), make)
    if why is not None:
        raise OutputPathError(f"{option} {path}: cannot be a folder of results ({why})")
    if is_sweep_dir(Path(path)):
        raise OutputPathError(f"{option} {path}: is a sweep's own folder; give the folder that holds sweeps "
                              f"({Path(path).parent})")
    return path


def output_file(path: Path, option: str) -> Path:
    """A file to write: a regular file (replaced) or a new one, whose folder exists or is made now."""
    path = Path(path)
    if path.exists() and not path.is_file():
        raise OutputPathError(f"{option} {path}: is {_kind(path)}; give the path of a file to write")
    why = _unmakeable(path.parent, make=True)
    if why is not None:
        raise OutputPathError(f"{option} {path}: cannot be written ({why})")
    return path


def refused_write(exc: OSError) -> str:
    """One line for a write the filesystem refused: the path, the errno, what it means."""
    code = exc.errno or 0
    parts = [f"{exc.filename or 'a file'}: {os.strerror(code)} ({errno.errorcode.get(code, code)})"]
    if code in _WHAT_TO_DO:
        parts.append(_WHAT_TO_DO[code])
    if code in (errno.EROFS, errno.EACCES, errno.EPERM):
        parts.append(READ_ONLY_FOLDERS)
    return "; ".join(parts)
