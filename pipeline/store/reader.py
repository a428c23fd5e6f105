"""Reading a sweep's tables with DuckDB: only the visible files (see :mod:`pipeline.store.files`),
tolerant of added columns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from pipeline.store.files import scan_sweep, whole_files
from pipeline.store.schema import FAILURE_TABLES


def select(files: Sequence[Path | str], columns: str, tail: str = "", params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """``SELECT columns FROM <files> tail`` as dicts; ``params`` bind the ``?`` in ``tail``; no files, no rows.

    Files are read with ``union_by_name`` (later schema versions add columns) and without hive
    partitioning (every id is a column in the files themselves).
    """
    if not files:
        return []
    with duckdb.connect() as con:
        cursor = con.execute(
            f"SELECT {columns} FROM read_parquet(?, union_by_name = true, hive_partitioning = false) {tail}",
            [[str(f) for f in files], *params],
        )
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


# An infrastructure failure's status (pipeline.run.rows.failure_rows): not a result, run again.
FAILED = "failed"


@dataclass(frozen=True)
class Finished:
    """The episodes with an episodes row (compacted or not): results, and infrastructure failures."""

    done: frozenset[str]
    failed: frozenset[str]


def finished_episodes(sweep_dir: Path) -> Finished:
    """What a resume skips and what it runs again, read from the names of the sweep's files and as
    few of their bytes as possible (a resume of a million-episode sweep may find 100,000 of them).

    The episodes with a row in a visible file of the episodes table are finished (the rows of
    broken files left out, as every reader does). Which are failures is read from the status column
    of the compacted parts, and of the per-episode files that may hold one: an infrastructure
    failure's rows are its episode's only rows outside its faults (``failure_rows``; writing them
    removes the attempt's other files), so a per-episode file whose episode has rows in another
    table holds a result and
    is neither opened nor checked here (``flowstate run`` checks every file before it plans).
    """
    if not sweep_dir.is_dir():
        return Finished(frozenset(), frozenset())
    by_table, _ = scan_sweep(sweep_dir)
    elsewhere: set[str] = set()
    for table, partitions in by_table.items():
        for partition in partitions if table not in FAILURE_TABLES else ():
            elsewhere.update(partition.small.keys(), partition.covered)
    parts = {part.path: part.episodes for partition in by_table["episodes"] for part in partition.active_parts}
    small = {episode: partition for partition in by_table["episodes"] for episode in partition.small.keys()
             if episode not in partition.covered}  # the visible per-episode files (see pending_small)
    maybe_failed = {episode: partition.small[episode] for episode, partition in small.items() if episode not in elsewhere}
    opened = whole_files([*parts, *maybe_failed.values()])
    kept = set(opened)
    finished = {episode for episode in small if episode not in maybe_failed or maybe_failed[episode] in kept}
    finished.update(*(episodes for path, episodes in parts.items() if path in kept))
    failed = frozenset(r["episode_id"] for r in select(opened, "DISTINCT episode_id", "WHERE status = ?", [FAILED]))
    return Finished(done=frozenset(finished) - failed, failed=failed)
