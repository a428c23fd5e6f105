"""Query results as a rich table, CSV, JSON, Parquet or markdown."""

from __future__ import annotations

import io
import json
import math
import sys
from collections.abc import Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from rich.console import Console
from rich.table import Table

from flowstate.errors import FlowStateError
from pipeline.analysis.catalog import Format
from pipeline.core.atomic import write_atomic, write_text_atomic


def cell_text(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        value += 0.0  # no "-0"
        return f"{value:.{digits}g}" if abs(value) < 1e-3 or abs(value) >= 1e6 else f"{value:.{digits}f}".rstrip("0").rstrip(".")
    return str(value)


def tokens_text(n: float | None) -> str:
    """A token count as the paper prints #Tok: 21.03M, 512K, 87."""
    if n is None:
        return "–"
    for size, unit in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= size:
            return f"{n / size:.2f}{unit}"
    return f"{n:.0f}"


def markdown_table(header: list[str], rows: Iterable[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def to_markdown(table: pa.Table, digits: int = 4) -> str:
    return markdown_table(table.column_names, ([cell_text(v, digits) for v in row.values()] for row in table.to_pylist()))


def _json_value(value: Any) -> Any:
    """What ``json`` cannot write by itself: DuckDB's sums of integers (HUGEINT) and its DECIMALs come
    as ``Decimal``, written as numbers (whole ones as integers); anything else (timestamps) as text."""
    if isinstance(value, Decimal):
        whole = isinstance(exponent := value.as_tuple().exponent, int) and exponent >= 0
        return int(value) if whole else float(value)
    return str(value)


def to_json(table: pa.Table) -> str:
    return json.dumps(table.to_pylist(), indent=2, ensure_ascii=False, default=_json_value) + "\n"


def to_csv(table: pa.Table) -> str:
    """CSV, with list, struct and map cells as JSON text (CSV has no nested values)."""
    buffer = io.BytesIO()
    pacsv.write_csv(_flat(table), buffer)
    return buffer.getvalue().decode("utf-8")


def _flat(table: pa.Table) -> pa.Table:
    for i, field in enumerate(table.schema):
        if pa.types.is_nested(field.type):
            texts = [None if v is None else json.dumps(v, ensure_ascii=False, default=str)
                     for v in table.column(i).to_pylist()]
            table = table.set_column(i, field.name, pa.array(texts, pa.string()))
    return table


def rich_table(table: pa.Table, title: str | None = None) -> Table:
    out = Table(title=title)
    for name, field in zip(table.column_names, table.schema, strict=True):
        numeric = pa.types.is_integer(field.type) or pa.types.is_floating(field.type) or pa.types.is_decimal(field.type)
        out.add_column(name, justify="right" if numeric else "left")
    for row in table.to_pylist():
        out.add_row(*(cell_text(v) for v in row.values()))
    return out


def write_result(table: pa.Table, fmt: Format, out: Path | None = None, *, title: str | None = None) -> None:
    """Print (table, csv, json) or write to ``out``; parquet needs ``out``."""
    if fmt == "parquet":
        if out is None:
            raise FlowStateError("the parquet format writes a file: give --out FILE.parquet")
        write_atomic(out, lambda tmp: pq.write_table(table, tmp))
        return
    if fmt == "table" and out is None:
        rendered = rich_table(table, title)
        # never squeeze columns into "…": a wide table may run past the terminal's edge instead
        needed = Console(width=100_000).measure(rendered).maximum
        Console(width=max(Console().width, needed)).print(rendered)
        return
    text = {"csv": to_csv, "json": to_json, "table": to_markdown}[fmt](table)
    if out is None:
        sys.stdout.write(text)
    else:
        write_text_atomic(out, text)
