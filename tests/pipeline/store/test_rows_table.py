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
