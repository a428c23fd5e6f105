"""Query results written out: nested cells (a query's list column) in CSV."""

from __future__ import annotations

import csv
import io
import json

import pyarrow as pa

from pipeline.analysis.formats import to_csv, to_json


def test_list_and_struct_cells_become_json_text_in_csv():
    table = pa.table({"method": ["reasoningbank", "mem0"], "titles": [["Check first", "Ask, then act"], None],
                      "hit": [{"record": "0", "score": 1.5}, None], "items": [2, 1]})
    rows = list(csv.DictReader(io.StringIO(to_csv(table))))
    assert json.loads(rows[0]["titles"]) == ["Check first", "Ask, then act"] and rows[1]["titles"] == ""
    assert json.loads(rows[0]["hit"]) == {"record": "0", "score": 1.5}
    assert [r["items"] for r in rows] == ["2", "1"]


def test_json_writes_every_sql_type_of_number_as_a_number():
    """DuckDB's sums of integers (HUGEINT) and DECIMALs reach pyarrow as decimals: numbers in JSON too."""
    import duckdb

    table = duckdb.sql(
        "SELECT sum(x) AS huge_sum, sum(x::DECIMAL(10, 2)) AS decimal_sum, 12345678901234567890::HUGEINT AS huge, "
        "1.25::DECIMAL(9, 3) AS decimal, count(*) AS bigint, avg(x) AS double, 7::TINYINT AS tinyint, "
        "true AS boolean, 'x' AS varchar, NULL::HUGEINT AS null_huge, [sum(x)] AS list, "
        "TIMESTAMP '2026-01-01 10:00:00' AS timestamp FROM range(4) AS t(x)").to_arrow_table()
    [row] = json.loads(to_json(table))
    assert row == {"huge_sum": 6, "decimal_sum": 6.0, "huge": 12345678901234567890, "decimal": 1.25, "bigint": 4,
                   "double": 1.5, "tinyint": 7, "boolean": True, "varchar": "x", "null_huge": None, "list": [6],
                   "timestamp": "2026-01-01 10:00:00"}
    assert type(row["huge_sum"]) is int and type(row["decimal_sum"]) is float
