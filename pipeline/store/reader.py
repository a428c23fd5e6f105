"""Reading a sweep's tables with DuckDB: only the visible files (see :mod:`pipeline.store.files`),
tolerant of added columns."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb

from pipeline.store.files import NoResultsError, sweep_dirs, table_files


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


def done_episodes(sweep_dir: Path) -> dict[str, str]:
    """``episode_id -> status`` for every episode with a row in the episodes table (compacted or not)."""
    if not sweep_dir.is_dir():
        return {}
    rows = select(table_files(sweep_dir)["episodes"], "episode_id, any_value(status) AS status", "GROUP BY episode_id")
    return {r["episode_id"]: r["status"] for r in rows}


def runs_table_files(runs: Path, table: str) -> list[Path]:
    """Visible files of ``table`` over every sweep under ``runs`` (none when there is no sweep)."""
    try:
        sweeps = sweep_dirs(runs)
    except NoResultsError:
        return []
    return [f for sweep in sweeps for f in table_files(sweep)[table]]
