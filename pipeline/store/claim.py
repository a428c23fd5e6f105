"""One writer per sweep: a claim file beside the sweep's directory, kept alive by a heartbeat.

``flowstate run`` holds the claim of its sweep from planning to the end of MLflow logging;
``compact``, ``track`` and ``grade`` take the same claim, so two drivers never write one sweep (a
resubmitted cluster job, a second terminal). Readers (``query``, ``report``, ``show``) take nothing.

The claim is ``<output dir>/<sweep id>.claim``: created with ``O_EXCL`` (atomic on local
filesystems and on NFSv3+), holding host, pid, what holds it, since when and a token, and rewritten
in place by a heartbeat every :data:`HEARTBEAT_S` seconds, which counts its beats. It lives beside
the directory, not in it, so ``--fresh`` can move the old results aside while holding it.

Taking over a dead driver's claim: one of this host whose process is gone is broken at once; any
other is broken only once the taker has watched it unchanged (same file, same bytes: no beat) for a
whole lease (:data:`LEASE_S`) on its own monotonic clock, never by comparing the holder's clock with
its own. Breaking renames the claim away (of two breakers one wins); a taker without ``--wait``
refuses at once a claim that looks alive (its process on this host, or another host's heartbeat
less than a lease old by the taker's clock: a guess that can only make it refuse).

Fencing: a driver judged dead may still run (a paused VM, a network partition). The holder keeps
its claim file open and checks, before each heartbeat and whenever a writer asks
(:meth:`SweepClaim.check`: before each episode it dispatches), that the file at the claim's path
is still that file; an episode actor checks the token before it stores an episode
(:class:`ClaimFence`). Once the claim is another's, :class:`ClaimLostError` says so and the holder
writes nothing more into the sweep.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from socket import gethostname

from pydantic import BaseModel, ConfigDict, ValidationError

from flowstate.errors import FlowStateError

LEASE_S = 60.0
HEARTBEAT_S = 15.0
POLL_S = 2.0


class ClaimHolder(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    host: str
    pid: int
    action: str  # run / compact / track / grade
    since: datetime
    heartbeat: datetime  # the holder's clock: shown, and a hint for refusing at once, never for taking over
    token: str  # tells this claim from a later one of the same process
    beats: int = 0  # heartbeats so far: another host sees the claim change

    def describe(self) -> str:
        return (f"{self.action} by pid {self.pid} on {self.host}, since {self.since:%Y-%m-%d %H:%M:%S} UTC "
                f"(last heartbeat {self.heartbeat:%H:%M:%S} UTC)")


class SweepBusyError(FlowStateError, RuntimeError):
    """Another driver holds the sweep."""


class ClaimLostError(FlowStateError, RuntimeError):
    """Another driver took this process's claim over (it judged this one dead): write nothing more."""


def claim_path(sweep_dir: Path) -> Path:
    return sweep_dir.parent / f"{sweep_dir.name}.claim"


def read_claim(sweep_dir: Path) -> ClaimHolder | None:
    """The claim of a sweep, if any looks alive (a dead or unreadable one counts as none)."""
    holder = _parse(_look(claim_path(sweep_dir)).data)
    return holder if holder is not None and _looks_alive(holder) else None


class ClaimFence(BaseModel):
    """What a writer in another process (an episode actor) checks before it writes: that the claim
    its driver took is still the sweep's."""

    model_config = ConfigDict(frozen=True)

    path: Path
    token: str

    def check(self) -> None:
        """Raise :class:`ClaimLostError` if another claim (or none) stands at the path. A read that met
        the holder's rewrite is read again; one that fails is no proof (the driver checks too)."""
        for _ in range(3):
            try:
                holder = _parse(self.path.read_bytes())
            except FileNotFoundError:
                break
            except OSError:
                return
            if holder is not None:
                if holder.token == self.token:
                    return
                break
            time.sleep(0.01)
        raise ClaimLostError(f"{self.path.parent / self.path.stem}: another driver took the sweep over")


@dataclass(eq=False)
class SweepClaim:
    """A claim this process holds: its open file, its heartbeat and the fence writers check."""

    path: Path
    holder: ClaimHolder
    fd: int
    lost: threading.Event = field(default_factory=threading.Event)
    _size: int = 0  # rewrites are padded to the longest text written, so none leaves a tail behind

    @property
    def fence(self) -> ClaimFence:
        return ClaimFence(path=self.path, token=self.holder.token)

    def check(self) -> None:
        """Raise :class:`ClaimLostError` if the claim is no longer this process's (a stat per call)."""
        if self.lost.is_set() or not self._still_ours():
            self.lost.set()
            taker = _parse(_look(self.path).data)
            now = f"it is now held by {taker.describe()}" if taker is not None else "its claim file is gone"
            raise ClaimLostError(
                f"{self.path.parent / self.path.stem}: this driver lost its claim to the sweep: another driver judged it "
                f"dead (no heartbeat for {LEASE_S:.0f} s: a paused machine, a network partition) and took it over; {now}")

    def write(self, holder: ClaimHolder) -> None:
        """Rewrite the claim in place (never another's file: this one, open since it was made)."""
        text = holder.model_dump_json().encode()
        self._size = max(self._size, len(text))
        os.pwrite(self.fd, text.ljust(self._size), 0)
        os.fsync(self.fd)
        self.holder = holder

    def beat(self) -> bool:
        """One heartbeat; False once the claim is another's. A failed write (a full disk, a flaky
        shared filesystem) is tried again at the next beat."""
        if not self._still_ours():
            self.lost.set()
            return False
        with contextlib.suppress(OSError):
            self.write(self.holder.model_copy(update={"heartbeat": datetime.now(UTC), "beats": self.holder.beats + 1}))
        return True

    def release(self) -> None:
        if self._still_ours():
            self.path.unlink(missing_ok=True)
        os.close(self.fd)

    def _still_ours(self) -> bool:
        """The file at the claim's path is the one this process made (a breaker renamed it away, and
        a new claim is another file)."""
        try:
            mine = os.fstat(self.fd)
        except OSError:  # ESTALE: deleted under this process (NFS)
            return False
        try:
            there = os.stat(self.path)
        except FileNotFoundError:
            return False
        except OSError:
            return True  # no proof either way now: asked again at the next beat or episode
        return (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino)


# Claims this process holds: claim path -> (depth, claim) (run holds it while it compacts and tracks).
_HELD: dict[Path, tuple[int, SweepClaim]] = {}
_HELD_LOCK = threading.Lock()


@contextlib.contextmanager
def claim_sweep(sweep_dir: Path, action: str, *, wait: bool = False,
                on_wait: Callable[[ClaimHolder], None] | None = None) -> Iterator[SweepClaim]:
    """Hold the sweep for ``action``; raise :class:`SweepBusyError` naming the holder when another
    driver has it, or (``wait``) wait until it is free. Re-entrant within a process."""
    key = claim_path(Path(sweep_dir)).resolve()
    with _HELD_LOCK:
        depth, held = _HELD.get(key, (0, None))
        if held is not None:
            _HELD[key] = (depth + 1, held)
    if held is not None:
        try:
            yield held
        finally:
            with _HELD_LOCK:
                _HELD[key] = (_HELD[key][0] - 1, held)
        return
    claim = _acquire(key, action, wait, on_wait)
    with _HELD_LOCK:
        _HELD[key] = (1, claim)
    stop = threading.Event()
    beat = threading.Thread(target=_heartbeat, args=(claim, stop), name=f"claim-{key.name}", daemon=True)
    beat.start()
    try:
        yield claim
    finally:
        stop.set()
        beat.join()
        with _HELD_LOCK:
            del _HELD[key]
        claim.release()


@dataclass
class _Look:
    """A claim file as seen once: its bytes and which file it was (None: no file)."""

    data: bytes | None
    file: tuple[int, int] | None


@dataclass
class _Watch:
    """A claim another driver holds, as watched by this one: since when (monotonic) it has not
    changed, and whether it ever did."""

    seen: _Look | None = None
    since: float = 0.0
    changed: bool = False

    def unchanged_for(self, look: _Look) -> float:
        now = time.monotonic()
        if look != self.seen:
            self.changed = self.seen is not None
            self.seen, self.since = look, now
        return now - self.since


def _acquire(path: Path, action: str, wait: bool, on_wait: Callable[[ClaimHolder], None] | None) -> SweepClaim:
    path.parent.mkdir(parents=True, exist_ok=True)
    watch, told = _Watch(), False
    while True:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
        except FileExistsError:
            look = _look(path)
            if look.file is None:
                continue  # released (or broken) meanwhile
            holder = _parse(look.data)
            if _dead(holder, watch.unchanged_for(look)):
                _break(path, look)
                continue
            if holder is not None and not wait and (watch.changed or _looks_alive(holder)):
                raise SweepBusyError(f"{path.parent / path.stem} is held by another driver: {holder.describe()}; "
                                     "wait for it (--wait), or stop it") from None
            if holder is not None and on_wait is not None and not told:
                on_wait(holder)
                told = True
            time.sleep(POLL_S)
            continue
        now = datetime.now(UTC)
        claim = SweepClaim(path, ClaimHolder(host=gethostname(), pid=os.getpid(), action=action, since=now,
                                             heartbeat=now, token=uuid.uuid4().hex), fd)
        try:
            claim.write(claim.holder)
        except BaseException:  # a full disk: no empty claim left behind
            claim.release()
            raise
        return claim


def _heartbeat(claim: SweepClaim, stop: threading.Event) -> None:
    """Beat until released, or until the claim is found to be another's (then ``claim.lost`` is set)."""
    while not stop.wait(HEARTBEAT_S):
        if not claim.beat():
            return


def _look(path: Path) -> _Look:
    try:
        with open(path, "rb") as handle:
            stat = os.fstat(handle.fileno())
            return _Look(handle.read(), (stat.st_dev, stat.st_ino))
    except FileNotFoundError:
        return _Look(None, None)
    except OSError:  # there, but this process cannot read it: watched like a claim being written
        return _Look(None, (0, 0))


def _parse(data: bytes | None) -> ClaimHolder | None:
    try:
        return ClaimHolder.model_validate_json(data) if data else None
    except (ValidationError, ValueError):
        return None


def _dead(holder: ClaimHolder | None, unchanged_s: float) -> bool:
    """A claim of this host: its process is gone (a stopped or suspended driver keeps its claim).
    Any other (or one that cannot be read): unchanged for a whole lease, as this process watched it."""
    if holder is not None and holder.host == gethostname():
        return not _alive(holder.pid)
    return unchanged_s >= LEASE_S


def _looks_alive(holder: ClaimHolder) -> bool:
    """Whether to refuse at once: its process on this host, or another host's heartbeat less than a
    lease old by this host's clock (a guess, never a reason to take a claim over)."""
    if holder.host == gethostname():
        return _alive(holder.pid)
    return (datetime.now(UTC) - holder.heartbeat).total_seconds() <= LEASE_S


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def _break(path: Path, seen: _Look) -> None:
    """Move a dead driver's claim out of the way. Renaming is atomic: of two drivers breaking the
    same claim one renames it, the other finds nothing; a claim that changed since it was judged
    dead (a beat, or another claim in its place) is put back."""
    aside = path.with_name(f".{path.name}.broken-{uuid.uuid4().hex}")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return
    if _look(aside).data != seen.data:
        with contextlib.suppress(OSError):
            os.link(aside, path)  # fails if yet another claim exists: then that one stands
    aside.unlink(missing_ok=True)
