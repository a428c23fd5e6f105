"""Reading a sweep's tables with DuckDB (all partitions, tolerant of added columns)."""

from __future__ import annotations

from pathlib import Path

import duckdb


def table_glob(sweep_dir: Path, table: str) -> str:
    return str(sweep_dir / table / "**" / "*.parquet")


def has_rows(sweep_dir: Path, table: str) -> bool:
    return any((sweep_dir / table).glob("**/*.parquet"))


def done_episodes(sweep_dir: Path) -> dict[str, str]:
    """``episode_id -> status`` for every episode with a row in the episodes table (compacted or not)."""
    if not has_rows(sweep_dir, "episodes"):
        return {}
    with duckdb.connect() as con:
        rows = con.execute(
            "SELECT episode_id, any_value(status) FROM read_parquet(?, union_by_name = true, hive_partitioning = false) "
            "GROUP BY episode_id",
            [table_glob(sweep_dir, "episodes")],
        ).fetchall()
    return dict(rows)


def sweep_dirs(runs: Path) -> list[Path]:
    """``runs`` itself if it is a sweep directory (it has a manifest), else the sweeps inside it."""
    if (runs / "manifest.json").exists():
        return [runs]
    return sorted(p.parent for p in runs.glob("*/manifest.json"))


def sql_glob(runs: Path, table: str) -> list[str]:
    """File globs of ``table`` over every sweep under ``runs`` (for ``read_parquet``)."""
    return [table_glob(sweep, table) for sweep in sweep_dirs(runs) if has_rows(sweep, table)]
