"""Per-episode Parquet files, written so that a crash never leaves a half file visible.

Layout: ``<sweep_dir>/<table>/cell=<cell_id>/<episode_id>.parquet`` (hive-style). Each file is
written under a hidden temporary name in the same folder, then renamed into place; readers glob
``*.parquet`` and never see the temporary; each file's inventory record
(:mod:`pipeline.store.inventory`) is written just before its rename. The episodes file is written last: its row is what
marks an episode as done, so an episode killed half-way is simply run again (and its other files
overwritten, not duplicated).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.atomic import write_atomic, write_bytes_atomic
from pipeline.store.inventory import forget_file, record_file, record_path
from pipeline.store.schema import SCHEMAS

# Order matters: "episodes" last (see module docstring).
WRITE_ORDER = ("steps", "transcript", "messages", "request_outcomes", "method_records", "episodes")


def table_dir(sweep_dir: Path, table: str) -> Path:
    return sweep_dir / table


def episode_file(sweep_dir: Path, table: str, cell_id: str, episode_id: str) -> Path:
    return table_dir(sweep_dir, table) / f"cell={cell_id}" / f"{episode_id}.parquet"


# Per-episode files are small and short-lived (compaction rewrites them with statistics and
# zstd): skip what costs more than it saves at this size — a file's fixed overhead dominates.
SMALL_FILE_OPTIONS: Mapping[str, Any] = {"compression": "snappy", "use_dictionary": False,
                                          "write_statistics": False, "write_page_index": False}
LARGE_FILE_OPTIONS: Mapping[str, Any] = {"compression": "zstd"}


def write_parquet_atomic(path: Path, table: pa.Table, episodes: Iterable[str],
                         options: Mapping[str, Any] = LARGE_FILE_OPTIONS) -> None:
    """Write ``table`` to ``path`` via a hidden temporary file and an atomic rename, with its
    inventory record (it holds ``episodes``) written in between."""
    record = record_path(path)
    previous = record.read_bytes() if record.exists() else None  # a file rewritten in place (regrade)
    try:
        write_atomic(path, lambda tmp: pq.write_table(table, tmp, **options),
                     before_rename=lambda tmp: record_file(tmp, path, episodes))
    except BaseException:  # the file stayed as it was: so does its record
        if previous is not None:
            write_bytes_atomic(record, previous)
        elif not path.exists():
            record.unlink(missing_ok=True)
        raise


def write_episode(sweep_dir: Path, cell_id: str, episode_id: str, rows: Mapping[str, Sequence[dict[str, Any]]]) -> None:
    """Write one episode's rows of every table (a table may have no rows, e.g. a failed episode)."""
    unknown = set(rows) - set(SCHEMAS)
    if unknown:
        raise ValueError(f"unknown tables {sorted(unknown)}")
    for name in WRITE_ORDER:
        table_rows = rows.get(name, ())
        path = episode_file(sweep_dir, name, cell_id, episode_id)
        if not table_rows:
            forget_file(path)  # a retried episode may have left rows from an earlier attempt
            continue
        write_parquet_atomic(path, pa.Table.from_pylist(list(table_rows), schema=SCHEMAS[name]), [episode_id],
                             SMALL_FILE_OPTIONS)
