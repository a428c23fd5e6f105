"""One writer per sweep: a claim file beside the sweep's directory, kept alive by a heartbeat.

``flowstate run`` holds the claim of its sweep from planning to the end of MLflow logging;
``compact``, ``track`` and ``grade`` take the same claim, so two drivers never write one sweep (a
resubmitted cluster job, a second terminal). Readers (``query``, ``report``, ``show``) take nothing.

The claim is ``<output dir>/<sweep id>.claim``: created with ``O_EXCL`` (atomic on local
filesystems and on NFSv3+), holding host, pid, what holds it and since when, and rewritten by a
heartbeat every :data:`HEARTBEAT_S` seconds. A claim of this host whose process is gone, or one of
another host whose heartbeat is older than the lease (:data:`LEASE_S`), belongs to a driver that
died: the next driver breaks it by renaming it away (so two breakers cannot both win) and takes
its own. It lives beside the
directory, not in it, so ``--fresh`` can move the old results aside while holding it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

LEASE_S = 60.0
HEARTBEAT_S = 15.0
POLL_S = 2.0


class ClaimHolder(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    host: str
    pid: int
    action: str  # run / compact / track / grade
    since: datetime
    heartbeat: datetime
    token: str  # tells this claim from a later one of the same process

    def describe(self) -> str:
        return (f"{self.action} by pid {self.pid} on {self.host}, since {self.since:%Y-%m-%d %H:%M:%S} UTC "
                f"(last heartbeat {self.heartbeat:%H:%M:%S} UTC)")


class SweepBusyError(RuntimeError):
    """Another driver holds the sweep."""


def claim_path(sweep_dir: Path) -> Path:
    return sweep_dir.parent / f"{sweep_dir.name}.claim"


def read_claim(sweep_dir: Path) -> ClaimHolder | None:
    """The live claim of a sweep, if any (a stale or unreadable one counts as none)."""
    holder = _read(claim_path(sweep_dir))
    return holder if holder is not None and not _stale(holder) else None


# Claims this process holds: sweep path -> depth (run holds it while it compacts and tracks).
_HELD: dict[Path, int] = {}
_HELD_LOCK = threading.Lock()


@contextlib.contextmanager
def claim_sweep(sweep_dir: Path, action: str, *, wait: bool = False,
                on_wait: Callable[[ClaimHolder], None] | None = None) -> Iterator[None]:
    """Hold the sweep for ``action``; raise :class:`SweepBusyError` naming the holder when another
    driver has it, or (``wait``) wait until it is free. Re-entrant within a process."""
    key = claim_path(Path(sweep_dir)).resolve()
    with _HELD_LOCK:
        if key in _HELD:
            _HELD[key] += 1
            nested = True
        else:
            nested = False
    if nested:
        try:
            yield
        finally:
            with _HELD_LOCK:
                _HELD[key] -= 1
        return
    holder = _acquire(key, action, wait, on_wait)
    with _HELD_LOCK:
        _HELD[key] = 1
    stop = threading.Event()
    beat = threading.Thread(target=_heartbeat, args=(key, holder, stop), name=f"claim-{key.name}", daemon=True)
    beat.start()
    try:
        yield
    finally:
        stop.set()
        beat.join()
        with _HELD_LOCK:
            del _HELD[key]
        current = _read(key)
        if current is not None and current.token == holder.token:  # never another's, nor one being written
            key.unlink(missing_ok=True)


def _acquire(path: Path, action: str, wait: bool, on_wait: Callable[[ClaimHolder], None] | None) -> ClaimHolder:
    path.parent.mkdir(parents=True, exist_ok=True)
    told = False
    while True:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            holder = _read(path)
            if holder is None:
                if _unreadable_for(path) > LEASE_S:  # a claim cut short while being written
                    _break(path, None)
                else:
                    time.sleep(0.1)
                continue
            if _stale(holder):
                _break(path, holder)
                continue
            if not wait:
                raise SweepBusyError(f"{path.parent / path.stem} is held by another driver: {holder.describe()}; "
                                     "wait for it (--wait), or stop it") from None
            if on_wait is not None and not told:
                on_wait(holder)
                told = True
            time.sleep(POLL_S)
            continue
        now = datetime.now(UTC)
        mine = ClaimHolder(host=socket.gethostname(), pid=os.getpid(), action=action, since=now, heartbeat=now,
                           token=uuid.uuid4().hex)
        with os.fdopen(fd, "w") as handle:
            handle.write(mine.model_dump_json())
            handle.flush()
            os.fsync(handle.fileno())
        return mine


def _heartbeat(path: Path, holder: ClaimHolder, stop: threading.Event) -> None:
    """Refresh the claim until released. A failed read or write (a full disk, a flaky shared
    filesystem, a breaker's rename in flight) is retried at the next beat; only another driver's
    claim in its place ends the heartbeat."""
    while not stop.wait(HEARTBEAT_S):
        current = _read(path)
        if current is not None and current.token != holder.token:
            return  # taken over: this process stalled past the lease
        if current is None:
            continue
        tmp = path.with_name(f".{path.name}.{holder.token}.tmp")
        try:
            tmp.write_text(holder.model_copy(update={"heartbeat": datetime.now(UTC)}).model_dump_json())
            os.replace(tmp, path)
        except OSError:
            tmp.unlink(missing_ok=True)


def _read(path: Path) -> ClaimHolder | None:
    try:
        return ClaimHolder.model_validate_json(path.read_bytes())
    except (OSError, ValidationError, ValueError):
        return None


def _stale(holder: ClaimHolder) -> bool:
    """On this host: its process is gone (a stopped or suspended driver keeps its claim). From
    another host: its heartbeat is older than the lease."""
    if holder.host == socket.gethostname():
        return not _alive(holder.pid)
    return (datetime.now(UTC) - holder.heartbeat).total_seconds() > LEASE_S


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def _unreadable_for(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0


def _break(path: Path, seen: ClaimHolder | None) -> None:
    """Move a dead driver's claim out of the way. Renaming is atomic: of two drivers breaking the
    same claim one renames it, the other finds nothing; a fresh claim renamed by mistake (the dead
    one was replaced in between) is put back."""
    aside = path.with_name(f".{path.name}.broken-{uuid.uuid4().hex}")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return
    moved = _read(aside)
    if moved is not None and (seen is None or moved.token != seen.token):
        with contextlib.suppress(OSError):
            os.link(aside, path)  # fails if yet another claim exists: then that one stands
    aside.unlink(missing_ok=True)
