"""The SQL reference, generated from the tables' schemas and the shipped queries.

Every table a sweep writes (:mod:`pipeline.store.schema`: each column, its type, and the comment
the schema's source gives it), the views every query may use, and every query of ``sql/`` (its
question, parameters and result columns, the columns read by binding the query over empty tables).
The documentation site builds it (``scripts/mkdocs_hooks.py``), so it cannot drift from the code.
"""

from __future__ import annotations

import inspect
import io
import re
import tokenize
from collections.abc import Iterator

import pyarrow as pa

from pipeline.analysis.catalog import list_queries
from pipeline.analysis.query import QuerySpec, execute, load_query, open_views, sweep_catalogs
from pipeline.store import schema
from pipeline.store.copies import ReadSet
from pipeline.store.tables import ANALYSIS_SCHEMAS, ANALYSIS_TABLES

_FIELD = re.compile(r'pa\.field\("(\w+)"')
_SCHEMA_START = re.compile(r"^(\w+) = pa\.schema\(|^(ID_FIELDS) = \[")
# Values that let a query's required parameters bind (the columns do not depend on them).
_PLACEHOLDERS = {None: "", "VARCHAR": "", "INTEGER": 0, "DOUBLE": 0.0, "BOOLEAN": False}


def _table_descriptions() -> dict[str, str]:
    """Table -> what it holds, from the schema module's docstring (a name, then its description)."""
    found: dict[str, str] = {}
    name = ""
    for line in (schema.__doc__ or "").splitlines():
        head, _, rest = line.partition(" ")
        if head in ANALYSIS_SCHEMAS:
            name = head
            found[name] = rest.strip()
        elif name and line.startswith(" "):
            found[name] += " " + line.strip()
        else:
            name = ""
    return found


def _column_notes() -> dict[tuple[str, str], str]:
    """(schema variable, column) -> the comment on the line above the column's line or at its end."""
    source = inspect.getsource(schema)
    comments = {tok.start[0]: tok.string.lstrip("#:").strip()
                for tok in tokenize.generate_tokens(io.StringIO(source).readline) if tok.type == tokenize.COMMENT}
    notes: dict[tuple[str, str], str] = {}
    block: list[str] = []
    current = ""
    for number, line in enumerate(source.splitlines(), start=1):
        start = _SCHEMA_START.match(line)
        if start:
            current = start.group(1) or start.group(2)
        if line.lstrip().startswith("#"):
            block.append(comments.get(number, ""))
            continue
        note = " ".join(block + ([comments[number]] if number in comments else []))
        for column in _FIELD.findall(line):
            notes[(current, column)] = note
        block = []
    return notes


def _variable_of(table: str) -> str:
    return next(name for name, value in vars(schema).items() if value is ANALYSIS_SCHEMAS[table] and name.isupper())


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def table_section(table: str, notes: dict[tuple[str, str], str], description: str) -> str:
    variable = _variable_of(table)
    rows = [f"### `{table}`", description, "| column | type | notes |", "|---|---|---|"]
    for field in ANALYSIS_SCHEMAS[table]:
        note = notes.get((variable, field.name)) or notes.get(("ID_FIELDS", field.name), "")
        required = "" if field.nullable else ", not null"
        rows.append(f"| `{field.name}` | `{field.type}`{required} | {_cell(note)} |")
    return "\n\n".join(rows[:2]) + "\n\n" + "\n".join(rows[2:])


def query_columns(spec: QuerySpec) -> list[pa.Field]:
    """A query's result columns: the query bound over empty tables."""
    con = open_views(ReadSet({table: [] for table in ANALYSIS_TABLES}, {}), sweep_catalogs(()))
    try:
        given = {p.name: _PLACEHOLDERS[p.type] for p in spec.params if p.required}
        return list(execute(con, spec, given).schema)
    finally:
        con.close()


def _header(sql: str) -> list[str]:
    """The comment lines a query file starts with, but its parameter lines (they get a table)."""
    lines = []
    for line in sql.splitlines():
        if not line.startswith("--"):
            break
        if "@param" not in line:
            lines.append(line.removeprefix("--").removeprefix(" ").rstrip())
    return lines


def query_section(spec: QuerySpec) -> str:
    lines = [f"### `{spec.name}`", "```text\n" + "\n".join(_header(spec.sql)) + "\n```"]
    if spec.params:
        params = ["| parameter | type | default | description |", "|---|---|---|---|"]
        params += [f"| `{p.name}` | {p.type or 'as given'} | {'required' if p.required else f'`{p.default!r}`'} "
                   f"| {_cell(p.doc)} |" for p in spec.params]
        lines.append("\n".join(params))
    else:
        lines.append("No parameters.")
    columns = ", ".join(f"`{f.name}` ({f.type})" for f in query_columns(spec))
    lines.append(f"Columns: {columns}.")
    return "\n\n".join(lines)


def _sections() -> Iterator[str]:
    yield "## Tables"
    yield ("Every sweep writes these tables (Parquet, one folder per table and cell). Every table starts with "
           "the id columns (`schema_version` … `model`).")
    descriptions = _table_descriptions()
    notes = _column_notes()
    for table in ANALYSIS_TABLES:
        yield table_section(table, notes, descriptions.get(table, ""))
    yield "## Shipped queries"
    yield "`flowstate query NAME` runs `sql/NAME.sql`; `--param NAME=VALUE` binds a parameter."
    for name in list_queries():
        yield query_section(load_query(name))


def sql_reference() -> str:
    """Every table, column and shipped query, in markdown."""
    return "\n\n".join(_sections()) + "\n"
