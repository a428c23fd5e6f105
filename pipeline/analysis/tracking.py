"""One MLflow store for all sweeps: a parent run per sweep, a child run per cell, sample traces.

Layout (experiment: the job's ``tracking.experiment``, else its name):

- parent run ``<sweep_id>``: params (job name, sweep id, trials, seed, code version, package versions,
  deployment details), tags ``flowstate.sweep_id``, ``flowstate.parquet_path``; artifacts
  ``config/`` (job file, resolved job, manifest), ``summary/`` (every shipped query as .md and .csv),
  ``report/`` (report.md and its figures).
- child run per cell ``<cell label>``: tags ``mlflow.parentRunId``, ``flowstate.cell_id``, benchmark,
  domain, method, model; metrics from the SQL of ``sql/`` (counts and pass rate, every metric the
  benchmark declares under its own name, pass^k, tokens, Δ vs. the job's baseline as
  ``vs_baseline.d_<metric>``, ISU / PSA / protocol internals, depth retention, model-call faults as
  ``faults.total`` and ``faults.<kind>``), logged with
  ``log_batch`` at step = the cell's finished episodes; up to ``trace_samples_per_cell`` episodes as
  traces attached to the child run.

Re-logging reuses everything: the parent run id is kept in the manifest (``mlflow_run_id``) and also
found by its sweep tag; child runs are found by parent and cell tags; params are logged once (they
cannot change in MLflow); a metric is logged again only when its value changed; traces are found by
their episode tag and only the missing samples are added.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import mlflow
from mlflow import MlflowClient
from mlflow.entities import Metric, Param, Run
from mlflow.exceptions import MlflowException
from pydantic import BaseModel

from pipeline.analysis.cost import CostModel, cost_models, with_gpu_seconds
from pipeline.analysis.formats import to_csv, to_markdown
from pipeline.analysis.query import connect, list_queries, load_query, query_rows, query_table
from pipeline.analysis.report import job_baseline, resolve_baseline, write_report
from pipeline.analysis.traces import CELL_TAG, EPISODE_TAG, episode_rows, log_episode_trace
from pipeline.claim import claim_sweep
from pipeline.manifest import MANIFEST, read_manifest, record_mlflow_run
from pipeline.redaction import redact_url, redacted_job_text, restore
from pipeline.store.files import broken_files

SWEEP_TAG = "flowstate.sweep_id"
PARENT_TAG = "mlflow.parentRunId"
CELL_KEYS = ("benchmark", "domain", "method", "model")
# query -> metric name prefix; each of these returns one row per cell (keyed by CELL_KEYS)
CELL_METRICS = {"pass_rate": "", "tokens": "tokens.", "isu_ops": "isu.", "psa": "psa.", "parse_errors": "protocol.",
                "depth_retention": "depth."}
_SKIP_COLUMNS = set(CELL_KEYS) | {"baseline"}
_PARAM_MAX = 500


class TrackingResult(BaseModel):
    tracking_uri: str
    experiment_id: str
    parent_run_id: str
    child_run_ids: dict[str, str]  # cell id -> run id
    metrics_logged: int
    traces_logged: int
    duration_s: float


@contextmanager
def _tracking_uri(uri: str | None) -> Iterator[str]:
    """MLflow's trace exporter follows the global tracking URI, so an explicit one is set for the
    duration, then the global and ``MLFLOW_TRACKING_URI`` are put back exactly as they were (setting
    the resolved value back would pin the global and hide a later change of the variable)."""
    if uri is None:
        yield mlflow.get_tracking_uri()
        return
    env = os.environ.get("MLFLOW_TRACKING_URI")
    # Without the variable, a set URI was set in code: pin it back; with it, follow the variable again.
    pinned = mlflow.get_tracking_uri() if env is None and mlflow.is_tracking_uri_set() else None
    mlflow.set_tracking_uri(uri)
    try:
        yield mlflow.get_tracking_uri()
    finally:
        mlflow.set_tracking_uri(pinned)  # type: ignore[arg-type] - None unsets it (public API, documented in code)
        if env is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = env


def _experiment_id(client: MlflowClient, name: str) -> str:
    experiment = client.get_experiment_by_name(name)
    return experiment.experiment_id if experiment else client.create_experiment(name)


def _parent_run(client: MlflowClient, experiment_id: str, sweep_id: str, known: str | None) -> Run:
    """The sweep's run: the one the manifest names, else the one tagged with the sweep, else a new one."""
    if known:
        try:
            run = client.get_run(known)
            if run.info.experiment_id == experiment_id and run.info.lifecycle_stage == "active":
                return run
        except MlflowException:
            pass
    found = client.search_runs([experiment_id], f"tags.`{SWEEP_TAG}` = '{sweep_id}' AND tags.`flowstate.kind` = 'sweep'",
                               max_results=1)
    if found:
        return found[0]
    return client.create_run(experiment_id, run_name=sweep_id, tags={SWEEP_TAG: sweep_id, "flowstate.kind": "sweep"})


def _child_runs(client: MlflowClient, experiment_id: str, parent: str) -> dict[str, Run]:
    """Existing cell runs of the sweep, by cell id (one search for all)."""
    runs = client.search_runs([experiment_id], f"tags.`{PARENT_TAG}` = '{parent}'", max_results=50_000)
    return {r.data.tags[CELL_TAG]: r for r in runs if CELL_TAG in r.data.tags}


def _new_child(client: MlflowClient, experiment_id: str, parent: str, cell: dict[str, Any]) -> Run:
    tags = {PARENT_TAG: parent, CELL_TAG: cell["cell_id"], "flowstate.kind": "cell", SWEEP_TAG: cell["sweep_id"],
            **{k: cell[k] for k in CELL_KEYS}}
    return client.create_run(experiment_id, run_name=cell["cell"], tags=tags)


def _flat(prefix: str, value: Any) -> dict[str, str]:
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _flat(f"{prefix}.{key}", item).items()}
    if value is None or isinstance(value, list):
        return {}
    return {prefix: str(value)[:_PARAM_MAX]}


def sweep_params(manifest: dict[str, Any]) -> dict[str, str]:
    job = manifest.get("job", {})
    params = {"job_name": manifest.get("job_name"), "sweep_id": manifest.get("sweep_id"),
              "code_version": manifest.get("code_version"), "trials": job.get("trials"), "seed": job.get("seed")}
    flat = {k: str(v) for k, v in params.items() if v is not None}
    flat |= _flat("versions", manifest.get("versions", {}))
    flat |= _flat("deployment", manifest.get("deployments", {}))
    return flat


def _log_new(client: MlflowClient, run: Run, params: dict[str, str], metrics: dict[str, float], step: int) -> int:
    """Params not logged yet (MLflow params cannot change) and metrics whose value changed, in batches;
    returns how many metrics were logged."""
    now = int(time.time() * 1000)
    new_params = [Param(k, v) for k, v in params.items() if k not in run.data.params]
    changed = [Metric(k, v, now, step) for k, v in sorted(metrics.items()) if run.data.metrics.get(k) != v]
    for i in range(0, max(len(new_params), len(changed)), 100):  # MLflow's batch limit: 100 params
        client.log_batch(run.info.run_id, params=new_params[i:i + 100], metrics=changed[i:i + 100])
    return len(changed)


def cell_metrics(con: Any, baseline: str | None,
                 costs: Mapping[str, CostModel] | None = None) -> dict[tuple[str, ...], dict[str, float]]:
    """Numeric metrics per cell key (benchmark, domain, method, model) from the shipped SQL, with the
    GPU-time estimate of the cells whose model has a cost model."""
    metrics: dict[tuple[str, ...], dict[str, float]] = {}

    def put(key: tuple[str, ...], name: str, value: Any) -> None:
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            metrics.setdefault(key, {})[name] = float(value)

    for query, prefix in CELL_METRICS.items():
        for row in query_rows(con, query):
            key = tuple(row[k] for k in CELL_KEYS)
            for column, value in row.items():
                if column not in _SKIP_COLUMNS:
                    put(key, f"{prefix}{column}", value)
    faults: dict[tuple[str, ...], dict[str, int]] = {}
    for row in query_rows(con, "faults"):  # summed over callers, deployments and statuses
        counts = faults.setdefault(tuple(row[k] for k in CELL_KEYS), {})
        for name in ("faults.total", f"faults.{row['kind']}"):
            counts[name] = counts.get(name, 0) + row["faults"]
    for key, counts in faults.items():
        for name, count in counts.items():
            put(key, name, count)
    for row in query_rows(con, "scores"):  # each benchmark's own metrics, under their declared names
        put(tuple(row[k] for k in CELL_KEYS), row["metric"], row["value"])
    if baseline is not None:
        for row in query_rows(con, "delta_vs_baseline", baseline=baseline):
            key, name = tuple(row[k] for k in CELL_KEYS), row["metric"]
            put(key, f"vs_baseline.d_{name}{'_pct' if name == 'tokens' else ''}", row["delta"])
            value = "tokens_per_episode" if name == "tokens" else name  # mean #Tok per episode
            put(key, f"vs_baseline.{value}", row["value"])
            put(key, f"vs_baseline.baseline_{value}", row["baseline_value"])
            if name == "pass_rate" or name == "tokens":
                put(key, "vs_baseline.tasks", row["tasks"])
                put(key, "vs_baseline.method_episodes", row["method_episodes"])
                put(key, "vs_baseline.baseline_episodes", row["baseline_episodes"])
    for row in query_rows(con, "pass_hat_k"):
        put(tuple(row[k] for k in CELL_KEYS), f"pass_hat_{row['k']}", row["pass_hat_k"])
    priced = {tuple(r[k] for k in CELL_KEYS): r for r in with_gpu_seconds(query_rows(con, "tokens"), costs or {})}
    for key, row in priced.items():
        put(key, "cost.gpu_s", row["gpu_s"])
        put(key, "cost.gpu_s_per_episode", row["gpu_s_per_episode"])
        base = priced.get(tuple(baseline if k == "method" else row[k] for k in CELL_KEYS)) if baseline else None
        if base is not None and base is not row and row["gpu_s_per_episode"] is not None and base["gpu_s_per_episode"]:
            put(key, "vs_baseline.d_gpu_s_per_episode_pct", 100 * (row["gpu_s_per_episode"] / base["gpu_s_per_episode"] - 1))
    distances: dict[tuple[str, ...], list[tuple[int, int]]] = {}
    for row in query_rows(con, "disclosure_distance"):
        distances.setdefault(tuple(row[k] for k in CELL_KEYS), []).append((row["distance"], row["disclosures"]))
    for key, pairs in distances.items():
        put(key, "psa.mean_distance", sum(d * n for d, n in pairs) / sum(n for _, n in pairs))
    return metrics


def _log_artifacts(client: MlflowClient, run_id: str, sweep_dir: Path, manifest: dict[str, Any], con: Any,
                   baseline: str | None) -> None:
    with tempfile.TemporaryDirectory(prefix="flowstate-mlflow-") as tmp:
        root = Path(tmp)
        config = root / "config"
        config.mkdir()
        (config / "resolved_job.json").write_text(json.dumps(manifest.get("job", {}), indent=2))
        if (sweep_dir / MANIFEST).is_file():
            shutil.copy(sweep_dir / MANIFEST, config / MANIFEST)
        job_file = Path(manifest.get("job_file") or "")
        if job_file.is_file():
            (config / job_file.name).write_text(redacted_job_text(job_file))
        summary = root / "summary"
        summary.mkdir()
        for name in list_queries():
            spec = load_query(name)
            if baseline is None and any(p.name == "baseline" for p in spec.params):
                continue  # a comparison without a baseline
            table = query_table(con, name, baseline=baseline)
            (summary / f"{name}.md").write_text(f"# {name}\n\n{spec.description}\n\n{to_markdown(table)}")
            (summary / f"{name}.csv").write_text(to_csv(table))
        write_report(con, sweep_dir, root / "report" / "report.md", baseline=baseline)
        for folder in ("config", "summary", "report"):
            client.log_artifacts(run_id, str(root / folder), artifact_path=folder)


def _cells(con: Any) -> list[dict[str, Any]]:
    sql = ("SELECT cell_id, any_value(cell) AS cell, any_value(sweep_id) AS sweep_id, "
           + ", ".join(f"any_value({k}) AS {k}" for k in CELL_KEYS)
           + ", count(*) FILTER (WHERE status <> 'failed') AS finished FROM episodes GROUP BY cell_id ORDER BY cell")
    return con.sql(sql).to_arrow_table().to_pylist()


def _traced(experiment_id: str, sweep_id: str) -> dict[str, set[str]]:
    """Episodes already logged as traces, by cell id (one search for the sweep)."""
    traces = mlflow.search_traces(locations=[experiment_id], filter_string=f"tags.`{SWEEP_TAG}` = '{sweep_id}'",
                                  include_spans=False, return_type="list")
    traced: dict[str, set[str]] = {}
    for t in traces:
        traced.setdefault(t.info.tags.get(CELL_TAG, ""), set()).add(t.info.tags.get(EPISODE_TAG, ""))
    return traced


def _log_traces(client: MlflowClient, con: Any, experiment_id: str, run_id: str, cell_id: str, have: set[str],
                wanted: int) -> int:
    """Up to ``wanted`` traces for the cell, counting those logged before; episodes in a fixed
    pseudo-random order (their ids are content hashes)."""
    if wanted <= len(have):
        return 0
    candidates = con.sql("SELECT * FROM finished WHERE cell_id = $cell ORDER BY episode_id",
                         params={"cell": cell_id}).to_arrow_table().to_pylist()
    todo = [e for e in candidates if e["episode_id"] not in have][: wanted - len(have)]
    rows = episode_rows(con, [e["episode_id"] for e in todo]) if todo else {}
    for episode in todo:
        log_episode_trace(client, episode, rows.get(episode["episode_id"], {}), experiment_id=experiment_id,
                          run_id=run_id, tags={SWEEP_TAG: episode["sweep_id"]})
    return len(todo)


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
    manifest = read_manifest(sweep_dir) or {"sweep_id": sweep_dir.name, "job_name": sweep_dir.name}
    tracking = manifest.get("job", {}).get("tracking") or {}
    experiment = experiment or tracking.get("experiment") or manifest.get("job_name") or sweep_dir.name
    samples = trace_samples_per_cell if trace_samples_per_cell is not None else tracking.get("trace_samples_per_cell", 3)
    uri = tracking_uri or tracking.get("tracking_uri")  # else MLFLOW_TRACKING_URI, else MLflow's default
    # the manifest keeps a secret of the URI as its ${NAME}: read it again; only the redacted form is shown
    real_uri = restore(uri, "tracking.tracking_uri") if uri else None
    with _tracking_uri(real_uri) as active_uri, connect(sweep_dir) as con:
        client = MlflowClient(active_uri)
        baseline = resolve_baseline(con, baseline or job_baseline(sweep_dir))
        experiment_id = _experiment_id(client, experiment)
        parent = _parent_run(client, experiment_id, manifest["sweep_id"], manifest.get("mlflow_run_id"))
        parent_id = parent.info.run_id
        record_mlflow_run(sweep_dir, parent_id)
        _log_new(client, parent, sweep_params(manifest), {}, 0)
        client.set_tag(parent_id, "flowstate.parquet_path", str(sweep_dir.resolve()))
        client.set_tag(parent_id, "flowstate.code_version", str(manifest.get("code_version")))
        # what the reader left out (see pipeline.store.files.table_files), for whoever compares runs
        left_out = broken_files(sweep_dir)
        client.set_tag(parent_id, "flowstate.incomplete", ", ".join(p.name for p in left_out) if left_out else "false")
        metrics = cell_metrics(con, baseline, cost_models(manifest.get("job") or {}))
        existing = _child_runs(client, experiment_id, parent_id)
        traced = _traced(experiment_id, manifest["sweep_id"])
        children: dict[str, str] = {}
        logged = traces = 0
        cells = _cells(con)
        for cell in cells:
            run = existing.get(cell["cell_id"]) or _new_child(client, experiment_id, parent_id, cell)
            children[cell["cell_id"]] = run.info.run_id
            params = {"cell_id": cell["cell_id"], "label": cell["cell"], **{k: cell[k] for k in CELL_KEYS}}
            logged += _log_new(client, run, params, metrics.get(tuple(cell[k] for k in CELL_KEYS), {}),
                               step=cell["finished"])
            if run.info.status != "FINISHED":
                client.set_terminated(run.info.run_id)
        # traces last: MLflow exports them from background threads, which would contend with the
        # run writes above for a sqlite store
        for cell in cells:
            traces += _log_traces(client, con, experiment_id, children[cell["cell_id"]], cell["cell_id"],
                                  traced.get(cell["cell_id"], set()), samples)
        _log_artifacts(client, parent_id, sweep_dir, manifest, con, baseline)
        client.set_terminated(parent_id)
        if traces:
            mlflow.flush_trace_async_logging()  # exported in the background, to this store
    shown = uri if uri is not None and real_uri != uri else active_uri
    return TrackingResult(tracking_uri=redact_url(shown), experiment_id=experiment_id, parent_run_id=parent_id,
                          child_run_ids=children, metrics_logged=logged, traces_logged=traces,
                          duration_s=time.monotonic() - started)
