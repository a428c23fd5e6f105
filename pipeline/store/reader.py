"""Reading a sweep's tables with DuckDB (all partitions, tolerant of added columns)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb


def table_glob(sweep_dir: Path, table: str) -> str:
    return str(sweep_dir / table / "**" / "*.parquet")


def has_rows(sweep_dir: Path, table: str) -> bool:
    return any((sweep_dir / table).glob("**/*.parquet"))


def select(globs: str | Sequence[str], columns: str, tail: str = "", params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """``SELECT columns FROM <the table files> tail`` as dicts; ``params`` bind the ``?`` in ``tail``.

    Files are read with ``union_by_name`` (later schema versions add columns) and without hive
    partitioning (every id is a column in the files themselves).
    """
    with duckdb.connect() as con:
        cursor = con.execute(
            f"SELECT {columns} FROM read_parquet(?, union_by_name = true, hive_partitioning = false) {tail}",
            [list(globs) if not isinstance(globs, str) else globs, *params],
        )
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor.fetchall()]


def done_episodes(sweep_dir: Path) -> dict[str, str]:
    """``episode_id -> status`` for every episode with a row in the episodes table (compacted or not)."""
    if not has_rows(sweep_dir, "episodes"):
        return {}
    rows = select(table_glob(sweep_dir, "episodes"), "episode_id, any_value(status) AS status", "GROUP BY episode_id")
    return {r["episode_id"]: r["status"] for r in rows}


def sweep_dirs(runs: Path) -> list[Path]:
    """``runs`` itself if it is a sweep directory (it has a manifest), else the sweeps inside it."""
    if (runs / "manifest.json").exists():
        return [runs]
    return sorted(p.parent for p in runs.glob("*/manifest.json"))


def sql_glob(runs: Path, table: str) -> list[str]:
    """File globs of ``table`` over every sweep under ``runs`` (for ``read_parquet``)."""
    return [table_glob(sweep, table) for sweep in sweep_dirs(runs) if has_rows(sweep, table)]
