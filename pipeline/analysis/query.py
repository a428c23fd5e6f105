"""Run the SQL files of ``sql/`` (or a user's own) over one sweep or a folder of sweeps.

A query file is one SELECT. Its header comment says what it answers; named parameters are declared
on lines ``-- @param NAME TYPE [= DEFAULT] [-- description]`` (TYPE: VARCHAR, INTEGER, DOUBLE or
BOOLEAN; DEFAULT a SQL literal: 'text', 3, 0.5, true, NULL) and used as ``$NAME``. Values are bound
by DuckDB, never pasted into the SQL text. A user's file may also use ``$NAME`` without declaring it;
such a parameter is then required and passed as given.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, get_args

import duckdb
import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from flowstate.errors import FlowStateError
from pipeline.analysis.catalog import SQL_DIR, VIEWS, list_queries
from pipeline.core.catalog import CATALOGS, BenchmarkCatalog
from pipeline.store.copies import ReadSet, runs_read_set
from pipeline.store.files import sweep_dirs
from pipeline.store.manifest import read_manifest, recorded_catalogs
from pipeline.store.tables import ANALYSIS_TABLES, anchor_file

ParamType = Literal["VARCHAR", "INTEGER", "DOUBLE", "BOOLEAN"]
_PARAM_TYPES: dict[str, ParamType] = {name: name for name in get_args(ParamType)}
_PARAM_LINE = re.compile(
    r"^--\s*@param\s+(?P<name>\w+)\s+(?P<type>\w+)(?:\s*=\s*(?P<default>'[^']*'|-?[^\s-]+))?\s*(?:--\s*(?P<doc>.*))?$")
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


class QueryError(FlowStateError, ValueError):
    """A query that cannot run as asked: unknown name, bad or missing parameter."""


class Param(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    type: ParamType | None = None  # None: undeclared, passed as given
    required: bool = True
    default: Any = None
    doc: str = ""

    def convert(self, value: Any) -> Any:
        """A value from the command line (text) or from Python, as the declared type."""
        if value is None:
            return None
        try:
            if self.type == "INTEGER":
                return int(value)
            if self.type == "DOUBLE":
                return float(value)
            if self.type == "BOOLEAN":
                if isinstance(value, bool):
                    return value
                text = str(value).strip().lower()
                if text in _TRUE | _FALSE:
                    return text in _TRUE
                raise ValueError(value)
        except ValueError:
            raise QueryError(f"parameter {self.name} must be {self.type}, got {value!r}") from None
        return str(value) if self.type == "VARCHAR" else value


class QuerySpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    path: Path
    sql: str
    description: str
    params: tuple[Param, ...]

    def bind(self, given: dict[str, Any]) -> dict[str, Any]:
        known = {p.name: p for p in self.params}
        unknown = sorted(set(given) - set(known))
        if unknown:
            listed = ", ".join(known) or "none"
            raise QueryError(f"query {self.name} has no parameter {', '.join(unknown)} (its parameters: {listed})")
        missing = [p.name for p in self.params if p.required and p.name not in given]
        if missing:
            hint = " ".join(f"--param {m}=VALUE" for m in missing)
            raise QueryError(f"query {self.name} needs parameter {', '.join(missing)} ({hint})")
        return {p.name: p.convert(given[p.name]) if p.name in given else p.default for p in self.params}


def _literal(text: str | None, type_: ParamType) -> tuple[bool, Any]:
    """(required, default) from a declared default literal."""
    if text is None:
        return True, None
    if text.upper() == "NULL":
        return False, None
    if text.startswith("'"):
        return False, text[1:-1]
    return False, Param(name="default", type=type_).convert(text)


def parse_query(path: Path, name: str | None = None) -> QuerySpec:
    sql = path.read_text(encoding="utf-8")
    header = []
    declared: dict[str, Param] = {}
    for line in sql.splitlines():
        if not line.startswith("--"):
            break
        match = _PARAM_LINE.match(line)
        if match is None:
            header.append(line[2:].strip())
            continue
        type_ = _PARAM_TYPES.get(match["type"].upper())
        if type_ is None:
            raise QueryError(f"{path}: parameter {match['name']} has unknown type {match['type'].upper()}")
        required, default = _literal(match["default"], type_)
        declared[match["name"]] = Param(name=match["name"], type=type_, required=required, default=default,
                                        doc=(match["doc"] or "").strip())
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(f"{path}: {exc}") from None
    if len(statements) != 1:
        raise QueryError(f"{path}: a query file holds exactly one statement, found {len(statements)}")
    used = statements[0].named_parameters
    params = tuple(declared.get(n) or Param(name=n) for n in sorted(used | set(declared)))
    return QuerySpec(name=name or path.stem, path=path, sql=sql, description=" ".join(header).strip(), params=params)


def load_query(name_or_path: str | Path) -> QuerySpec:
    """``NAME`` -> ``sql/NAME.sql``; anything ending in ``.sql`` is a path to the user's own file."""
    text = str(name_or_path)
    if text.endswith(".sql"):
        path = Path(text)
        if not path.is_file():
            raise QueryError(f"{path}: no such query file")
        return parse_query(path)
    if text in list_queries():
        return parse_query(SQL_DIR / f"{text}.sql", text)
    raise QueryError(f"unknown query {text!r}; known queries: {', '.join(list_queries())} "
                     "(or give the path of your own .sql file)")


METRIC_CATALOG = pa.schema([
    ("benchmark", pa.string()), ("position", pa.int32()), ("metric", pa.string()), ("label", pa.string()),
    ("description", pa.string()), ("aggregate", pa.string()), ("source", pa.string()), ("key", pa.string()),
    ("numerator", pa.string()), ("denominator", pa.string()), ("headline", pa.bool_()),
])


def sweep_catalogs(sweeps: Iterable[Path]) -> dict[str, BenchmarkCatalog]:
    """Per benchmark, what readers need of it: the catalog its sweeps' manifests recorded (the first
    sweep's, in folder order), else (sweeps written before manifests held one) the installed
    plug-in's. Nothing a results folder names is imported: results are data."""
    catalogs = {name: CATALOGS.get(name) for name in CATALOGS.names()}
    recorded: dict[str, BenchmarkCatalog] = {}
    for sweep in sweeps:
        for name, catalog in recorded_catalogs(sweep).items():
            recorded.setdefault(name, catalog)
    return catalogs | recorded


def metric_catalog(catalogs: Mapping[str, BenchmarkCatalog]) -> pa.Table:
    """Every benchmark's declared metrics, in declaration order (the ``metric_catalog`` table)."""
    rows = []
    for name, catalog in sorted(catalogs.items()):
        for position, m in enumerate(catalog.metrics):
            rows.append({"benchmark": name, "position": position, "metric": m.name, "label": m.label,
                         "description": m.description, "aggregate": m.aggregate, "source": m.column or "metrics",
                         "key": m.key or m.name, "numerator": m.numerator, "denominator": m.denominator,
                         "headline": m.headline})
    return pa.Table.from_pylist(rows, schema=METRIC_CATALOG)


def depth_panels(catalogs: Mapping[str, BenchmarkCatalog]) -> pa.Table:
    """Every benchmark's domains with the depth-analysis panel each belongs to."""
    rows = [{"benchmark": name, "domain": domain, "panel": panel}
            for name, catalog in sorted(catalogs.items()) for domain, panel in catalog.depth_panels.items()]
    schema = pa.schema([("benchmark", pa.string()), ("domain", pa.string()), ("panel", pa.string())])
    return pa.Table.from_pylist(rows, schema=schema)


def connect(runs_dir: Path | str) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the views of ``sql/views.sql`` over ``runs_dir`` (one copy
    of each episode: :mod:`pipeline.store.copies`) and the ``metric_catalog`` table of the
    benchmarks' declared metrics."""
    runs_dir = Path(runs_dir)
    return open_views(runs_read_set(runs_dir), sweep_catalogs(sweep_dirs(runs_dir)))


def open_views(read: ReadSet, catalogs: Mapping[str, BenchmarkCatalog]) -> duckdb.DuckDBPyConnection:
    """:func:`connect`'s connection over the files of ``read``; with no files, every table and view
    has its columns and no rows (what the SQL reference reads the queries' columns from)."""
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    for table in ANALYSIS_TABLES:
        paths = [str(anchor_file(table))] + [str(f) for f in read.files[table]]
        con.execute(f"SET VARIABLE {table}_files = $files", {"files": paths})  # table: a fixed name, not input
    con.register("metric_catalog", metric_catalog(catalogs))
    con.register("depth_panels", depth_panels(catalogs))
    left_out = read.other_copies()
    if left_out:  # rows of another copy of their episode (views.sql creates the table empty otherwise)
        files, episodes = zip(*left_out, strict=True)
        con.from_arrow(pa.table({"filename": files, "episode_id": episodes})).create("other_copies")
    con.execute((SQL_DIR / f"{VIEWS}.sql").read_text(encoding="utf-8"))
    return con


def execute(con: duckdb.DuckDBPyConnection, spec: QuerySpec, params: dict[str, Any] | None = None) -> pa.Table:
    bound = spec.bind(params or {})
    try:
        return con.sql(spec.sql, params=bound).to_arrow_table()
    except duckdb.Error as exc:
        raise QueryError(f"query {spec.name} ({spec.path}) failed: {exc}") from None


def query_table(con: duckdb.DuckDBPyConnection, name: str, **available: Any) -> pa.Table:
    """A shipped query's result; of ``available``, each parameter the query declares is passed."""
    spec = load_query(name)
    declared = {p.name for p in spec.params}
    return execute(con, spec, {k: v for k, v in available.items() if k in declared})


def query_rows(con: duckdb.DuckDBPyConnection, name: str, **available: Any) -> list[dict[str, Any]]:
    return query_table(con, name, **available).to_pylist()


def resolve_baseline(con: duckdb.DuckDBPyConnection, wanted: str | None) -> str | None:
    """The baseline's method label: ``wanted`` itself, else the one label of its family
    (``full_context-json`` when Full Context ran only on the JSON protocol)."""
    if wanted is None:
        return None
    labels = {row[0] for row in con.sql("SELECT DISTINCT method FROM episodes").fetchall()}
    family = sorted(label for label in labels if label.startswith(f"{wanted}-"))
    return family[0] if wanted not in labels and len(family) == 1 else wanted


def job_baseline(runs_dir: Path | str) -> str | None:
    """The baseline the sweeps' jobs name (``analysis.baseline``); an error when they disagree."""
    try:
        sweeps = sweep_dirs(Path(runs_dir))
    except ValueError:
        return None
    named = {baseline for d in sweeps
             if (baseline := ((read_manifest(d) or {}).get("job", {}).get("analysis") or {}).get("baseline")) is not None}
    if len(named) > 1:
        raise QueryError(f"the sweeps under {runs_dir} name different baselines ({', '.join(sorted(named))}): "
                          "choose one with --baseline")
    return next(iter(named), None)


def check_metric(con: duckdb.DuckDBPyConnection, spec: QuerySpec, params: Mapping[str, Any]) -> None:
    """A ``metric`` parameter must name a metric of the results' benchmarks (of every benchmark the
    catalog knows, over no results): an unknown name is an error that lists them, not an empty table."""
    metric = params.get("metric")
    if metric is None or "metric" not in {p.name for p in spec.params}:
        return
    known = [row[0] for row in con.sql(
        "SELECT DISTINCT metric FROM metric_catalog WHERE benchmark IN (SELECT benchmark FROM episodes) "
        "OR NOT EXISTS (SELECT 1 FROM episodes) ORDER BY metric").fetchall()]
    if metric not in known:
        raise QueryError(f"query {spec.name}: no metric {metric!r} in these results; the metrics there are: "
                         f"{', '.join(known) or 'none'}")


def run_query(name_or_path: str | Path, runs_dir: Path | str, params: dict[str, Any] | None = None) -> pa.Table:
    """Run a shipped query (``NAME``) or a ``.sql`` file over one sweep or a folder of sweeps.

    A ``baseline`` parameter not given is the baseline the sweeps' jobs name (``analysis.baseline``).
    """
    spec = load_query(name_or_path)
    params = dict(params or {})
    wants_baseline = "baseline" in {p.name for p in spec.params} and "baseline" not in params
    if wants_baseline and (named := job_baseline(runs_dir)) is not None:
        params["baseline"] = named
    spec.bind(params)  # parameter errors before any file is read
    with connect(runs_dir) as con:
        if wants_baseline:
            params["baseline"] = resolve_baseline(con, params["baseline"])
        check_metric(con, spec, params)
        return execute(con, spec, params)
