"""One MLflow store for all sweeps: a parent run per sweep, a child run per cell, sample traces.

Layout (experiment: the job's ``tracking.experiment``, else its name):

- parent run ``<sweep_id>``: params (job name, sweep id, trials, seed, code version, package versions,
  deployment details), tags ``flowstate.sweep_id``, ``flowstate.parquet_path``; its description
  (``mlflow.note.content``, on its overview page) the headline comparison table, a row per cell
  (:mod:`pipeline.tracking.headline`); artifacts ``config/`` (job file, resolved job, manifest),
  ``summary/`` (every shipped query as .md and .csv), ``report/`` (report.md and its figures).
- child run per cell, named method first: ``<method> · <domain> · <model>`` (the cell's label is its
  ``label`` param); tags ``mlflow.parentRunId``, ``flowstate.cell_id``, benchmark, domain, method,
  model; a dataset input ``<benchmark>/<domain>`` (the run list's Dataset column; its digest that
  of the job's settings of that benchmark and domain);
  metrics:

  - the headline metrics, as the paper prints them, named ``<n> <label>`` so that they sort first
    (in the paper's column order): each benchmark's headline metrics in percent (τ-bench ``1 PR``,
    ``2 DB``, ``3 Act.``; MemoryArena ``1 SR``, ``2 PS``, ``3 sPS``) rounded to the decimals of its
    paper table, then ``<n> Tok`` (#Tok, 4 significant digits); with a baseline, beside each
    ``<name> Δ pp`` (percentage points) and ``<n> Tok Δ pct`` (relative change of #Tok per
    episode), 0 for the baseline itself;
  - the exact ones, from the SQL of ``sql/`` (counts and pass rate, every metric the
    benchmark declares under its own name, pass^k, tokens, Δ vs. the job's baseline as
    ``vs_baseline.d_<metric>``, ISU / PSA / protocol internals, depth retention, model-call faults as
    ``faults.total`` and ``faults.<kind>``, 0 for a cell without them);

  logged with ``log_batch`` at step = the cell's finished episodes; up to ``trace_samples_per_cell``
  episodes as traces attached to the child run.

While a sweep runs, :mod:`pipeline.run.live_tracking` keeps the same runs RUNNING with live metrics;
this module logs everything at the end, once per sweep and in batches: each query runs once over
all cells, one ``log_batch`` per run, the sampled episodes read in one pass, the tables and the
report once. It ends the runs: FINISHED once every planned episode has a row; before that, a run
already ended keeps its status (KILLED, FAILED) and one left RUNNING by a driver that died is
KILLED; the cells' runs end as the sweep's. A parent it makes after the fact spans the sweep's
recorded runs.

Re-logging reuses everything: the parent run id is kept in the manifest (``mlflow_run_id``) and also
found by its sweep tag; child runs are found by parent and cell tags (one an older version named
otherwise is renamed); params are logged once (they cannot change in MLflow); a metric is logged
again only when its value changed; a dataset input only when the run lacks it; traces are found by
their episode tag and only the missing samples are added.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
from mlflow import MlflowClient
from mlflow.entities import Run
from mlflow.utils.validation import MAX_TAG_VAL_LENGTH
from pydantic import BaseModel

from pipeline.analysis.formats import to_csv, to_markdown
from pipeline.analysis.query import (
    connect,
    job_baseline,
    list_queries,
    load_query,
    query_table,
    resolve_baseline,
    sweep_catalogs,
)
from pipeline.analysis.report import paper_section, write_report
from pipeline.config.secrets import redact_url
from pipeline.core.cost import CostModel, cost_models, with_gpu_seconds
from pipeline.core.fault_injection import crash_point
from pipeline.store.claim import claim_sweep
from pipeline.store.files import broken_files
from pipeline.store.manifest import read_manifest, record_mlflow_run
from pipeline.tracking import mlflow_runs as runs
from pipeline.tracking.headline import HeadlineRow, headline_rows, headline_table
from pipeline.tracking.mlflow_runs import CELL_KEYS, PARENT_TAG, SWEEP_TAG
from pipeline.tracking.traces import CELL_TAG, EPISODE_TAG, episode_rows, episode_trace, write_traces

__all__ = ["CELL_TAG", "PARENT_TAG", "SWEEP_TAG", "TrackingResult", "cell_metrics", "log_sweep"]
# query -> metric name prefix; each of these returns one row per cell (keyed by CELL_KEYS)
CELL_METRICS = {"pass_rate": "", "tokens": "tokens.", "isu_ops": "isu.", "psa": "psa.", "parse_errors": "protocol.",
                "depth_retention": "depth."}
_SKIP_COLUMNS = set(CELL_KEYS) | {"baseline"}
NOTE_TAG = "mlflow.note.content"  # a run's description in the MLflow UI


class TrackingResult(BaseModel):
    tracking_uri: str
    experiment_id: str
    parent_run_id: str
    child_run_ids: dict[str, str]  # cell id -> run id
    metrics_logged: int
    traces_logged: int
    status: str  # the parent's, after logging
    duration_s: float
    phases_s: dict[str, float]  # where the time went (metrics, runs, traces, tables and report)


def shipped_results(con: Any, baseline: str | None) -> dict[str, pa.Table]:
    """Every shipped query's result, each run once (the comparisons only with a baseline): the
    summary tables and the cells' metrics both come from these."""
    results = {}
    for name in list_queries():
        if baseline is None and any(p.name == "baseline" for p in load_query(name).params):
            continue
        results[name] = query_table(con, name, baseline=baseline)
    return results


def cell_metrics(results: Mapping[str, pa.Table], baseline: str | None,
                 costs: Mapping[str, CostModel] | None = None) -> dict[tuple[str, ...], dict[str, float]]:
    """Numeric metrics per cell key (benchmark, domain, method, model) from the shipped SQL's
    :func:`shipped_results`, with the GPU-time estimate of the cells whose model has a cost model."""
    metrics: dict[tuple[str, ...], dict[str, float]] = {}

    def query_rows(name: str) -> list[dict[str, Any]]:
        return results[name].to_pylist() if name in results else []

    def put(key: tuple[str, ...], name: str, value: Any) -> None:
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            metrics.setdefault(key, {})[name] = float(value)

    for query, prefix in CELL_METRICS.items():
        for row in query_rows(query):
            key = tuple(row[k] for k in CELL_KEYS)
            for column, value in row.items():
                if column not in _SKIP_COLUMNS:
                    put(key, f"{prefix}{column}", value)
    faults: dict[tuple[str, ...], dict[str, int]] = {}
    for row in query_rows("faults"):  # summed over callers, deployments and statuses
        counts = faults.setdefault(tuple(row[k] for k in CELL_KEYS), {})
        for name in ("faults.total", f"faults.{row['kind']}"):
            counts[name] = counts.get(name, 0) + row["faults"]
    kinds = {name for counts in faults.values() for name in counts} | {"faults.total"}
    for key in set(metrics) | set(faults):  # a cell without faults has 0 of each kind, not none
        for name in kinds:
            put(key, name, faults.get(key, {}).get(name, 0))
    for row in query_rows("scores"):  # each benchmark's own metrics, under their declared names
        put(tuple(row[k] for k in CELL_KEYS), row["metric"], row["value"])
    if baseline is not None:
        for row in query_rows("delta_vs_baseline"):
            key, name = tuple(row[k] for k in CELL_KEYS), row["metric"]
            delta = row["delta_pct" if name == "tokens" else "delta_pp"]
            put(key, f"vs_baseline.d_{name}{'_pct' if name == 'tokens' else ''}", delta)
            value = "tokens_per_episode" if name == "tokens" else name  # mean #Tok per episode
            put(key, f"vs_baseline.{value}", row["value"])
            put(key, f"vs_baseline.baseline_{value}", row["baseline_value"])
            if name == "pass_rate" or name == "tokens":
                put(key, "vs_baseline.tasks", row["tasks"])
                put(key, "vs_baseline.method_episodes", row["method_episodes"])
                put(key, "vs_baseline.baseline_episodes", row["baseline_episodes"])
    for row in query_rows("pass_hat_k"):
        put(tuple(row[k] for k in CELL_KEYS), f"pass_hat_{row['k']}", row["pass_hat_k"])
    priced = {tuple(r[k] for k in CELL_KEYS): r for r in with_gpu_seconds(query_rows("tokens"), costs or {})}
    for key, row in priced.items():
        put(key, "cost.gpu_s", row["gpu_s"])
        put(key, "cost.gpu_s_per_episode", row["gpu_s_per_episode"])
        base = priced.get(tuple(baseline if k == "method" else row[k] for k in CELL_KEYS)) if baseline else None
        if base is not None and base is not row and row["gpu_s_per_episode"] is not None and base["gpu_s_per_episode"]:
            put(key, "vs_baseline.d_gpu_s_per_episode_pct", 100 * (row["gpu_s_per_episode"] / base["gpu_s_per_episode"] - 1))
    distances: dict[tuple[str, ...], list[tuple[int, int]]] = {}
    for row in query_rows("disclosure_distance"):
        distances.setdefault(tuple(row[k] for k in CELL_KEYS), []).append((row["distance"], row["disclosures"]))
    for key, pairs in distances.items():
        put(key, "psa.mean_distance", sum(d * n for d, n in pairs) / sum(n for _, n in pairs))
    return metrics


def sweep_headline(results: Mapping[str, pa.Table], baseline: str | None,
                   decimals: Mapping[str, int]) -> list[HeadlineRow]:
    """The headline rows (:func:`pipeline.tracking.headline.headline_rows`) of :func:`shipped_results`."""
    def rows(name: str) -> list[dict[str, Any]]:
        return results[name].to_pylist() if name in results else []

    return headline_rows(rows("scores"), rows("tokens"), rows("delta_vs_baseline"), rows("pass_rate"), baseline,
                         decimals)


PAPER_POINTER = ("The paper's published figures beside this sweep's are in the report (artifacts: `report/report.md`, "
                 "section *The paper beside this sweep*): too long for a run's description.")


def description(manifest: Mapping[str, Any], headline: list[HeadlineRow], baseline: str | None,
                decimals: Mapping[str, int], paper: str | None = None) -> str:
    """The parent run's description (its overview page renders it): the headline comparison table,
    then the paper's published figures beside the sweep's (the report's section), if it has any."""
    job = manifest.get("job_name") or manifest["sweep_id"]
    text = (headline_table(headline, baseline, decimals)
            + f"\n\nJob **{job}**, sweep `{manifest['sweep_id']}`. To compare the cells' runs: in the run list, "
              "search ``tags.`flowstate.kind` = 'cell'``, sort by `1 …` (the first headline metric), group by "
              "the `method`, `benchmark` or `model` tag; Columns → Metrics adds the headline columns.\n")
    if paper and len(text) + len(paper) + 2 <= MAX_TAG_VAL_LENGTH:
        return f"{text}\n{paper}\n"
    if paper:  # MLflow would cut it mid-table
        return text + f"\n{PAPER_POINTER}\n"
    return text


def _log_artifacts(client: MlflowClient, run_id: str, sweep_dir: Path, manifest: dict[str, Any], con: Any,
                   results: Mapping[str, pa.Table], baseline: str | None) -> None:
    with tempfile.TemporaryDirectory(prefix="flowstate-mlflow-") as tmp:
        root = Path(tmp)
        runs.write_config(root / "config", sweep_dir, manifest)
        summary = root / "summary"
        summary.mkdir()
        for name, table in results.items():
            description = load_query(name).description
            (summary / f"{name}.md").write_text(f"# {name}\n\n{description}\n\n{to_markdown(table)}")
            (summary / f"{name}.csv").write_text(to_csv(table))
        write_report(con, sweep_dir, root / "report" / "report.md", baseline=baseline)
        client.log_artifacts(run_id, str(root))  # config/, summary/, report/ in one upload


def _cells(con: Any) -> list[dict[str, Any]]:
    """One row per cell: its ids, how many episodes have a row, how many finished (not failed)."""
    sql = ("SELECT cell_id, any_value(cell) AS cell, any_value(sweep_id) AS sweep_id, "
           + ", ".join(f"any_value({k}) AS {k}" for k in CELL_KEYS)
           + ", count(*) AS recorded, count(*) FILTER (WHERE status <> 'failed') AS finished "
           "FROM episodes GROUP BY cell_id ORDER BY cell")
    return con.sql(sql).to_arrow_table().to_pylist()


def _traced(client: MlflowClient, experiment_id: str, sweep_id: str) -> dict[str, set[str]]:
    """Episodes already logged as traces, by cell id (one search for the sweep, page by page)."""
    traced: dict[str, set[str]] = {}
    token = None
    while True:
        page = client.search_traces(locations=[experiment_id], filter_string=f"tags.`{SWEEP_TAG}` = '{sweep_id}'",
                                    include_spans=False, max_results=500, page_token=token)
        for t in page:
            traced.setdefault(t.info.tags.get(CELL_TAG, ""), set()).add(t.info.tags.get(EPISODE_TAG, ""))
        token = page.token
        if not token:
            return traced


def _samples(con: Any, traced: Mapping[str, set[str]], cells: list[str], wanted: int) -> list[dict[str, Any]]:
    """The finished episodes to add as traces: per cell, the first ``wanted`` in a fixed
    pseudo-random order (their ids are content hashes), counting those logged before; one query."""
    if all(len(traced.get(cell, ())) >= wanted for cell in cells):
        return []
    depth = wanted + max((len(traced.get(cell, ())) for cell in cells), default=0)
    candidates = con.sql("SELECT * FROM finished QUALIFY row_number() OVER (PARTITION BY cell_id ORDER BY episode_id) "
                         "<= $depth ORDER BY cell_id, episode_id", params={"depth": depth}).to_arrow_table().to_pylist()
    todo: list[dict[str, Any]] = []
    for cell in cells:
        have = traced.get(cell, set())
        fresh = [e for e in candidates if e["cell_id"] == cell and e["episode_id"] not in have]
        todo += fresh[:max(0, wanted - len(have))]
    return todo


def _end_status(run: Run | None, complete: bool) -> str | None:
    """What the sweep's run (None: a new one) ends as, None to leave it as it is: FINISHED once every
    planned episode has a row; before that a run already ended keeps its status (KILLED, FAILED), and
    one left RUNNING by a driver that died (or new) is KILLED."""
    if complete:
        return None if run is not None and run.info.status == runs.FINISHED else runs.FINISHED
    return None if run is not None and runs.is_terminal(run.info.status) else runs.KILLED


def _recorded_span(manifest: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """The start of the sweep's first recorded run and the end of its last, in ms (a parent made after
    the fact spans them)."""
    recorded = [r for r in manifest.get("runs", []) if isinstance(r, dict)]

    def ms(value: Any) -> int | None:
        try:
            return int(datetime.fromisoformat(value).timestamp() * 1000)
        except (TypeError, ValueError):
            return None

    return (ms(recorded[0].get("started_at")) if recorded else None,
            ms(recorded[-1].get("finished_at")) if recorded else None)


def log_sweep(sweep_dir: Path | str, *, experiment: str | None = None, tracking_uri: str | None = None,
              trace_samples_per_cell: int | None = None, baseline: str | None = None) -> TrackingResult:
    """Log (or re-log) one sweep to MLflow from this (the driver) process; see the module docstring.
    Takes the sweep's claim: two drivers never log one sweep at once."""
    sweep_dir = Path(sweep_dir)
    with claim_sweep(sweep_dir, "track"):
        return _log_sweep(sweep_dir, experiment, tracking_uri, trace_samples_per_cell, baseline)


def _log_sweep(sweep_dir: Path, experiment: str | None, tracking_uri: str | None, trace_samples_per_cell: int | None,
               baseline: str | None) -> TrackingResult:
    started = time.monotonic()
    phases: dict[str, float] = {}

    def phase(name: str, since: float) -> float:
        phases[name] = time.monotonic() - since
        return time.monotonic()

    manifest = read_manifest(sweep_dir) or {"sweep_id": sweep_dir.name, "job_name": sweep_dir.name}
    where = runs.target(manifest, sweep_dir.name)
    samples = trace_samples_per_cell if trace_samples_per_cell is not None else where.trace_samples_per_cell
    client = runs.open_client(tracking_uri or where.tracking_uri)
    with connect(sweep_dir) as con:
        baseline = resolve_baseline(con, baseline or job_baseline(sweep_dir))
        cells = _cells(con)
        results = shipped_results(con, baseline)
        metrics = cell_metrics(results, baseline, cost_models(manifest))
        decimals = {b: c.percent_decimals for b, c in sweep_catalogs([sweep_dir]).items()}
        headline = sweep_headline(results, baseline, decimals)
        for row in headline:
            metrics.setdefault((row.benchmark, row.domain, row.method, row.model), {}).update(row.metrics())
        t = phase("queries (SQL)", started)
        experiment_id = runs.experiment_id(client, experiment or where.experiment)
        found = runs.find_parent(client, experiment_id, manifest["sweep_id"], manifest.get("mlflow_run_id"))
        first_start, last_end = _recorded_span(manifest)
        parent = found or runs.new_parent(client, experiment_id, manifest["sweep_id"], first_start)
        parent_id = parent.info.run_id
        record_mlflow_run(sweep_dir, parent_id)
        status = _end_status(found, sum(c["recorded"] for c in cells) >= manifest.get("episodes", 0))
        # what the reader left out (see pipeline.store.files.table_files), for whoever compares runs
        left_out = broken_files(sweep_dir)
        for key, value in {"flowstate.parquet_path": str(sweep_dir.resolve()),
                           "flowstate.code_version": str(manifest.get("code_version")),
                           "flowstate.incomplete": ", ".join(p.name for p in left_out) if left_out else "false",
                           NOTE_TAG: description(manifest, headline, baseline, decimals,
                                                      paper_section(con, baseline))}.items():
            if parent.data.tags.get(key) != value:
                client.set_tag(parent_id, key, value)
        runs.log_new(client, parent, runs.sweep_params(manifest), {}, 0)
        end = status or parent.info.status  # the cells' runs end as the sweep's
        existing = runs.child_runs(client, experiment_id, parent_id)
        children: dict[str, str] = {}
        logged = 0
        for cell in cells:
            run = runs.child_run(client, experiment_id, parent_id, cell, existing)
            runs.log_dataset(client, run, cell, manifest)
            children[cell["cell_id"]] = run.info.run_id
            logged += runs.log_new(client, run, runs.cell_params(cell),
                                   metrics.get(tuple(cell[k] for k in CELL_KEYS), {}), step=cell["finished"])
            if run.info.status != end:
                client.set_terminated(run.info.run_id, end)
            crash_point("tracking")
        t = phase("runs and metrics (MLflow)", t)
        todo = _samples(con, _traced(client, experiment_id, manifest["sweep_id"]), [c["cell_id"] for c in cells],
                        samples)
        rows = episode_rows(con, [e["episode_id"] for e in todo]) if todo else {}
        write_traces(client, experiment_id, (
            episode_trace(e, rows.get(e["episode_id"], {}), run_id=children[e["cell_id"]], tags={SWEEP_TAG: e["sweep_id"]})
            for e in todo))
        t = phase("traces", t)
        _log_artifacts(client, parent_id, sweep_dir, manifest, con, results, baseline)
        t = phase("report and artifacts", t)
        if status is not None:
            client.set_terminated(parent_id, status, end_time=None if found else last_end)
    shown = redact_url(tracking_uri) if tracking_uri else where.shown(client.tracking_uri)
    return TrackingResult(tracking_uri=shown, experiment_id=experiment_id, parent_run_id=parent_id,
                          child_run_ids=children, metrics_logged=logged, traces_logged=len(todo), status=end,
                          duration_s=time.monotonic() - started, phases_s=phases)
