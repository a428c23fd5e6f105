"""``rows_table`` builds exactly the table ``pa.Table.from_pylist`` builds, for every stored table."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest

from pipeline.store.schema import SCHEMAS, rows_table


def _value(field: pa.Field, i: int):
    t = field.type
    if pa.types.is_string(t):
        return f"{field.name} {i} ✓"
    if pa.types.is_integer(t):
        return i * 7
    if pa.types.is_floating(t):
        return i / 3
    if pa.types.is_boolean(t):
        return i % 2 == 0
    if pa.types.is_timestamp(t):
        return datetime(2026, 12, 2, 4, i, tzinfo=UTC)
    if pa.types.is_map(t):
        return {"a": 1.5, "b": float(i)}
    if pa.types.is_list(t):
        inner = t.value_type
        if pa.types.is_struct(inner):
            return [{f.name: _value(f, i) for f in inner}]
        return [_value(pa.field("x", inner), i)]
    if pa.types.is_struct(t):
        return {f.name: _value(f, i) for f in t}
    raise AssertionError(f"no sample value for {field.name}: {t}")


@pytest.mark.parametrize("table", sorted(SCHEMAS))
def test_rows_table_equals_from_pylist(table: str) -> None:
    schema = SCHEMAS[table]
    rows = [{f.name: _value(f, i) for f in schema} for i in range(3)]
    rows.append({schema.names[0]: _value(schema.field(0), 9), "not_a_column": 1})  # a missing column is null
    rows.append({f.name: None for f in schema})
    expected = pa.Table.from_pylist(rows, schema=schema)
    built = rows_table(rows, schema)
    assert built.schema.equals(expected.schema, check_metadata=True)
    assert built.equals(expected)
    assert built.to_pylist() == expected.to_pylist()
    assert built.column(schema.names[1]).null_count >= 2


def test_rows_table_keeps_the_schema_metadata() -> None:
    schema = SCHEMAS["episodes"].with_metadata({"flowstate": "x"})
    assert rows_table([], schema).schema.metadata == {b"flowstate": b"x"}


def test_an_actor_converts_rows_without_importing_pandas_and_pandas_still_works() -> None:
    """In a fresh interpreter (pandas is imported in this one): the same table, no pandas, and pandas
    importable afterwards, pyarrow's own ``to_pandas`` included."""
    import subprocess
    import sys

    script = """
import sys
from datetime import UTC, datetime
import pyarrow as pa
from pipeline.store.schema import SCHEMAS, convert_rows_without_pandas, rows_table
convert_rows_without_pandas()
row = {"episode_id": "e1", "reward": 0.5, "metrics": {"a": 1.0}, "started_at": datetime(2026, 12, 2, tzinfo=UTC)}
table = rows_table([row], SCHEMAS["episodes"])
assert table.equals(pa.Table.from_pylist([row], schema=SCHEMAS["episodes"])), "a different table"
assert "pandas" not in sys.modules, "pandas was imported"
assert table.select(["reward"]).to_pandas()["reward"].tolist() == [0.5]
import pandas
assert pa.array(pandas.Series([1.5, 2.5])).to_pylist() == [1.5, 2.5]
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr
