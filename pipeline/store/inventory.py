"""Every Parquet file of a sweep, accounted for: its rows, bytes, SHA-256 and episodes.

Each data file ``<table>/cell=<id>/<name>.parquet`` has a record ``inventory/<table>/cell=<id>/<name>.json``,
written (atomically) after the file's bytes are complete and before the file is renamed into
place, so a visible file always has its record; the record goes when the file goes (compaction,
a retried episode). An episode's own files, written together by its actor, share one record: that
of its episodes file, which carries the others' (``files``) and is written just before the
episodes file appears, the moment that makes the others visible (:mod:`pipeline.store.files`). One
record file per episode instead of one per table: creating a file is what a write costs most on a
busy or networked disk. With the records, :func:`verify` tells a file that changed after it was
written (a truncated copy, a disk fault) or one that is missing from a file nobody wrote (a stray or
foreign one), and names the episodes each held.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, ValidationError

from pipeline.core.atomic import write_text_atomic
from pipeline.core.data import sha256_file

INVENTORY = "inventory"
EPISODES_TABLE = "episodes"  # its per-episode files' records carry their episode's other files'
QUARANTINE = "quarantine"
PARQUET_MAGIC = b"PAR1"


class FileRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rows: int
    bytes: int
    sha256: str
    episodes: list[str]
    # On an episodes file's record: the records of its episode's files in the other tables, by table.
    files: dict[str, FileRecord] | None = None


def records_folder(partition: Path) -> Path:
    """``<sweep>/<table>/cell=<id>/`` -> ``<sweep>/inventory/<table>/cell=<id>/``."""
    return partition.parent.parent / INVENTORY / partition.parent.name / partition.name


def record_path(data_file: Path) -> Path:
    """``<sweep>/<table>/cell=<id>/<name>.parquet`` -> ``<sweep>/inventory/<table>/cell=<id>/<name>.json``."""
    return records_folder(data_file.parent) / f"{data_file.stem}.json"


def carrier_path(data_file: Path) -> Path:
    """The record that carries per-episode file ``data_file``'s when it has none of its own: its
    episode's episodes file's, ``<sweep>/inventory/episodes/cell=<id>/<episode>.json``."""
    partition = data_file.parent
    return partition.parent.parent / INVENTORY / EPISODES_TABLE / partition.name / f"{data_file.stem}.json"


def record_file(written: Path, final: Path, episodes: Iterable[str]) -> None:
    """Account for ``written`` (a complete temporary) under the name it is about to get, ``final``.
    An episodes file rewritten in place (regrade) goes on carrying its episode's other files."""
    previous = _read(record_path(final))
    write_record(final, FileRecord(rows=pq.read_metadata(written).num_rows, bytes=written.stat().st_size,
                                   sha256=sha256_file(written), episodes=sorted(episodes),
                                   files=previous.files if previous is not None else None))


def write_record(data_file: Path, record: FileRecord) -> None:
    """Store ``record`` as the inventory record of ``data_file``."""
    write_text_atomic(record_path(data_file), record.model_dump_json(exclude_none=True))


def forget_file(data_file: Path) -> None:
    """Remove a data file and then its record."""
    data_file.unlink(missing_ok=True)
    record_path(data_file).unlink(missing_ok=True)


def _read(record: Path) -> FileRecord | None:
    try:
        return FileRecord.model_validate_json(record.read_bytes())
    except (OSError, ValidationError, ValueError):
        return None


class RecordReader:
    """Reads files' records; asked for an episode's files one after another, it reads the record
    that carries theirs once (verify reads every file's)."""

    def __init__(self) -> None:
        self._last: tuple[Path, FileRecord | None] | None = None

    def _carrier(self, path: Path) -> FileRecord | None:
        if self._last is None or self._last[0] != path:
            self._last = (path, _read(path))
        return self._last[1]

    def __call__(self, data_file: Path) -> FileRecord | None:
        """``data_file``'s own record, else the one its episode's record carries (None: neither)."""
        own, carrier = record_path(data_file), carrier_path(data_file)
        if own == carrier:  # an episodes file
            return self._carrier(carrier)
        record = _read(own)
        if record is not None:
            return record
        found = self._carrier(carrier)
        return found.files.get(data_file.parent.parent.name) if found is not None and found.files else None


def read_record(data_file: Path) -> FileRecord | None:
    """``data_file``'s record (see :class:`RecordReader`)."""
    return RecordReader()(data_file)


@dataclass(frozen=True)
class Problem:
    table: str
    cell: str
    file: Path
    episodes: tuple[str, ...]  # what the inventory says it held (a per-episode file: its episode)
    reason: str

    def describe(self) -> str:
        held = f"{len(self.episodes)} episodes" if len(self.episodes) != 1 else f"episode {self.episodes[0]}"
        return f"{self.table} {self.cell} {self.file.name}: {self.reason} (held {held})"


@dataclass
class Verification:
    checked: int = 0
    unrecorded: int = 0  # readable files without a record (written before the inventory existed)
    problems: list[Problem] = field(default_factory=list)
    # parts holding episodes a newer part also holds: not bad files (nothing to run again), but copies
    duplicates: list[Problem] = field(default_factory=list)
    duration_s: float = 0.0

    @property
    def bad_episodes(self) -> frozenset[str]:
        return frozenset(e for p in self.problems for e in p.episodes)


def check_file(data_file: Path, record: FileRecord | None, *, thorough: bool) -> str | None:
    """Why ``data_file`` cannot be read as its ``record`` says it was written (None: it can).
    ``thorough`` hashes it; otherwise only its size and its Parquet footer are looked at."""
    try:
        size = data_file.stat().st_size
    except OSError:
        return "missing"
    if record is not None and size != record.bytes:
        return f"{size:,} bytes where {record.bytes:,} were written"
    if not _has_footer(data_file, size):
        return "not a Parquet file (no footer)"
    if thorough:
        try:
            digest = sha256_file(data_file)
        except OSError as exc:  # a bad sector, a permission
            return f"unreadable ({exc.strerror or exc})"
        if record is not None and digest != record.sha256:
            return "its SHA-256 differs from the one recorded when it was written"
        try:
            rows = pq.read_metadata(data_file).num_rows
        except Exception as exc:  # noqa: BLE001 - pyarrow raises several kinds for a broken footer
            return f"unreadable ({type(exc).__name__}: {exc})"
        if record is not None and rows != record.rows:
            return f"{rows} rows where {record.rows} were written"
    return None


def looks_whole(path: Path) -> bool:
    """A Parquet file's first and last four bytes, without its record: what every reader checks."""
    try:
        return _has_footer(path, path.stat().st_size)
    except OSError:
        return False


def _has_footer(path: Path, size: int) -> bool:
    if size < 12:
        return False
    try:
        with path.open("rb") as handle:
            head = handle.read(4)
            handle.seek(size - 4)
            return head == PARQUET_MAGIC and handle.read(4) == PARQUET_MAGIC
    except OSError:
        return False


def episodes_of(data_file: Path, is_part: bool) -> tuple[str, ...]:
    """What a file held: its record's episodes, else (a per-episode file) the episode in its name."""
    record = read_record(data_file)
    if record is not None:
        return tuple(record.episodes)
    return () if is_part else (data_file.stem,)


def quarantine(sweep_dir: Path, data_file: Path) -> Path:
    """Move a bad file and its record under ``<sweep>/quarantine/`` (kept for inspection)."""
    relative = data_file.relative_to(sweep_dir)
    target = sweep_dir / QUARANTINE / relative
    copies = 1
    while target.exists():  # an earlier quarantine of the same name stays
        target = target.with_name(f"{data_file.stem}.{copies}{data_file.suffix}")
        copies += 1
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(data_file, target)
    record = record_path(data_file)
    if record.exists():
        os.replace(record, target.with_suffix(".json"))
    return target
