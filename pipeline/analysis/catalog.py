"""What the command line needs at start-up, kept free of heavy imports: the shipped queries and the
output formats."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

SQL_DIR = Path(__file__).resolve().parents[2] / "sql"
VIEWS = "views"
Format = Literal["table", "csv", "json", "parquet"]
FORMATS: tuple[Format, ...] = ("table", "csv", "json", "parquet")


def list_queries() -> list[str]:
    return sorted(p.stem for p in SQL_DIR.glob("*.sql") if p.stem != VIEWS)
