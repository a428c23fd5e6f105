"""Per-episode Parquet files, written so that a crash never leaves a half file visible.

Layout: ``<sweep_dir>/<table>/cell=<cell_id>/<episode_id>.parquet`` (hive-style). Each file is
written under a hidden temporary name in the same folder, then renamed into place; readers glob
``*.parquet`` and never see the temporary. The episodes file is written last: its row is what
marks an episode as done (and makes its other files visible), so an episode killed half-way is
simply run again (and its other files overwritten, not duplicated). Its inventory record
(:mod:`pipeline.store.inventory`), written just before its rename, carries the records of the
episode's other files: one record file per episode.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.atomic import TEMPORARY_GLOB, write_atomic, write_bytes_atomic
from pipeline.core.fault_injection import crash_point
from pipeline.store.inventory import (
    EPISODES_TABLE,
    INVENTORY,
    FileRecord,
    forget_file,
    record_file,
    record_path,
    write_record,
)
from pipeline.store.schema import SCHEMAS, rows_table

# Order matters: "episodes" last (see module docstring).
WRITE_ORDER = ("steps", "transcript", "messages", "request_outcomes", "method_records", "faults", "episodes")


def table_dir(sweep_dir: Path, table: str) -> Path:
    return sweep_dir / table


def episode_file(sweep_dir: Path, table: str, cell_id: str, episode_id: str) -> Path:
    return table_dir(sweep_dir, table) / f"cell={cell_id}" / f"{episode_id}.parquet"


# Per-episode files are small and short-lived (compaction rewrites them with statistics and
# zstd): skip what costs more than it saves at this size — a file's fixed overhead dominates.
SMALL_FILE_OPTIONS: Mapping[str, Any] = {"compression": "snappy", "use_dictionary": False,
                                          "write_statistics": False, "write_page_index": False}
LARGE_FILE_OPTIONS: Mapping[str, Any] = {"compression": "zstd"}


def write_parquet_atomic(path: Path, table: pa.Table, episodes: Iterable[str]) -> None:
    """Write ``table`` to ``path`` via a hidden temporary file and an atomic rename, with its
    inventory record (it holds ``episodes``) written in between. Streams to disk (compacted parts)."""
    _keeping_record(path, lambda: write_atomic(path, lambda tmp: pq.write_table(table, tmp, **LARGE_FILE_OPTIONS),
                                               before_rename=lambda tmp: record_file(tmp, path, episodes)))


@dataclass(frozen=True)
class EncodedFile:
    """A per-episode file built in memory, with the record it gets: encoding is CPU work and
    writing is I/O, so a caller can do the one on its event loop and the other on a thread."""

    path: Path
    data: memoryview
    record: FileRecord


def encode_small_parquet(path: Path, table: pa.Table, episodes: Iterable[str]) -> EncodedFile:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, **SMALL_FILE_OPTIONS)
    data = memoryview(sink.getvalue())
    return EncodedFile(path, data, FileRecord(rows=table.num_rows, bytes=len(data),
                                              sha256=hashlib.sha256(data).hexdigest(), episodes=sorted(episodes)))


def write_encoded_atomic(file: EncodedFile) -> None:
    """:func:`write_parquet_atomic` for an encoded file: its record comes from the bytes written
    (no second read) and the file costs one open."""
    _keeping_record(file.path, lambda: write_bytes_atomic(
        file.path, file.data, before_rename=lambda _: write_record(file.path, file.record)))


def _keeping_record(path: Path, write: Callable[[], None]) -> None:
    """Run ``write``; if it fails, the file stayed as it was, and so does its record."""
    record = record_path(path)
    previous = record.read_bytes() if record.exists() else None  # a file rewritten in place (regrade)
    try:
        write()
    except BaseException:
        if previous is not None:
            write_bytes_atomic(record, previous)
        elif not path.exists():
            record.unlink(missing_ok=True)
        raise


EncodedEpisode = list[tuple[Path, EncodedFile | None]]


def encode_episode(sweep_dir: Path, cell_id: str, episode_id: str,
                   rows: Mapping[str, Sequence[dict[str, Any]]]) -> EncodedEpisode:
    """Every table's file of one episode, in write order (``None``: the table has no rows, e.g. a
    failed episode, and an earlier attempt's file must go); the episodes file, last, with the record
    that carries the others'."""
    unknown = set(rows) - set(SCHEMAS)
    if unknown:
        raise ValueError(f"unknown tables {sorted(unknown)}")
    if not rows.get(EPISODES_TABLE):
        raise ValueError("an episode's rows include its episodes row (it marks the episode as done)")
    encoded: EncodedEpisode = []
    carried: dict[str, FileRecord] = {}
    for name in WRITE_ORDER:
        table_rows = rows.get(name, ())
        path = episode_file(sweep_dir, name, cell_id, episode_id)
        file = encode_small_parquet(path, rows_table(table_rows, SCHEMAS[name]), [episode_id]) if table_rows else None
        if name == EPISODES_TABLE:  # last: its record carries the others'
            assert file is not None
            file = dataclasses.replace(file, record=file.record.model_copy(update={"files": carried}))
        elif file is not None:
            carried[name] = file.record
        encoded.append((path, file))
    return encoded


def store_episode(encoded: EncodedEpisode) -> None:
    """Write an encoded episode's files in order: the others without records of their own, then the
    episodes file with the record that carries theirs."""
    *others, (_, last) = encoded
    for index, (path, file) in enumerate(others):
        if index:
            crash_point("write")
        if file is None:
            forget_file(path)  # a retried episode may have left rows from an earlier attempt
        else:
            write_bytes_atomic(path, file.data)
            record_path(path).unlink(missing_ok=True)  # one an earlier writer left (regrade) would shadow the carried one
    crash_point("write")
    assert last is not None
    write_encoded_atomic(last)


def write_episode(sweep_dir: Path, cell_id: str, episode_id: str, rows: Mapping[str, Sequence[dict[str, Any]]]) -> None:
    """Write one episode's rows of every table (a table may have no rows, e.g. a failed episode)."""
    store_episode(encode_episode(sweep_dir, cell_id, episode_id, rows))


def remove_orphan_temporaries(sweep_dir: Path) -> int:
    """Delete the hidden temporaries that writes cut short by a kill left in the store's folders
    (a killed process cannot clean up after itself); only safe while no writer runs, i.e. under the
    sweep's claim with no actors. Returns how many were removed."""
    removed = 0
    for folder in (*WRITE_ORDER, INVENTORY):
        for temporary in table_dir(sweep_dir, folder).rglob(TEMPORARY_GLOB):
            temporary.unlink(missing_ok=True)
            removed += 1
    return removed
