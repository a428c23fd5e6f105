"""A sweep's runs in an MLflow store: where they go, how they are found again, and how they are
written (only what changed, in batches). Shared by the live tracking of a running sweep
(:mod:`pipeline.run.live_tracking`) and the full logging at its end (:mod:`pipeline.tracking.mlflow_log`).

A sweep is a parent run tagged ``flowstate.sweep_id`` (its id also kept in the manifest); a cell is
a child run tagged ``mlflow.parentRunId`` and ``flowstate.cell_id``. Either writer finds the runs the
other made, so a resume, a rerun and ``flowstate track`` all add to the same runs.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from mlflow import MlflowClient
from mlflow.entities import Dataset, DatasetInput, InputTag, Metric, Param, Run, RunStatus
from mlflow.exceptions import MlflowException
from pydantic import BaseModel

from pipeline.config.secrets import redact_url, redacted_job_text, restore
from pipeline.store.manifest import MANIFEST
from pipeline.tracking.traces import CELL_TAG

SWEEP_TAG = "flowstate.sweep_id"
KIND_TAG = "flowstate.kind"
PARENT_TAG = "mlflow.parentRunId"
CELL_KEYS = ("benchmark", "domain", "method", "model")
RUNNING, FINISHED, KILLED = "RUNNING", "FINISHED", "KILLED"
_PARAM_MAX = 500
_BATCH = 100  # MLflow's limit on params per log_batch (metrics: 1,000)


def open_client(tracking_uri: str | None) -> MlflowClient:
    """A client of the store (None: MLFLOW_TRACKING_URI, else MLflow's default). MLflow would print each
    run it ends as a link under the tracking URI, a password in the URI included: flowstate says where
    the runs are itself, the password redacted."""
    os.environ["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] = "true"
    return MlflowClient(tracking_uri)


class Target(BaseModel):
    """Where a sweep is logged: the job's ``tracking`` section, else the defaults."""

    experiment: str
    tracking_uri: str | None  # None: MLFLOW_TRACKING_URI, else MLflow's own default
    shown_uri: str | None  # as the manifest writes it: a secret as its ${NAME}, a URL password as ***
    trace_samples_per_cell: int

    def shown(self, active_uri: str) -> str:
        """The store's URI as it may be printed and recorded."""
        return redact_url(self.shown_uri if self.shown_uri is not None and self.shown_uri != self.tracking_uri
                          else active_uri)


def target(manifest: Mapping[str, Any], default_name: str) -> Target:
    """The manifest keeps a secret of the URI as its ``${NAME}``: it is read again from the environment."""
    tracking = manifest.get("job", {}).get("tracking") or {}
    uri = tracking.get("tracking_uri")
    return Target(experiment=tracking.get("experiment") or manifest.get("job_name") or default_name,
                  tracking_uri=restore(uri, "tracking.tracking_uri") if uri else None, shown_uri=uri,
                  trace_samples_per_cell=tracking.get("trace_samples_per_cell", 3))


def now_ms() -> int:
    return int(time.time() * 1000)


def experiment_id(client: MlflowClient, name: str) -> str:
    experiment = client.get_experiment_by_name(name)
    return experiment.experiment_id if experiment else client.create_experiment(name)


def find_parent(client: MlflowClient, experiment: str, sweep_id: str, known: str | None) -> Run | None:
    """The sweep's run: the one the manifest names, else the one tagged with the sweep."""
    if known:
        try:
            run = client.get_run(known)
            if run.info.experiment_id == experiment and run.info.lifecycle_stage == "active":
                return run
        except MlflowException:
            pass
    found = client.search_runs([experiment], f"tags.`{SWEEP_TAG}` = '{sweep_id}' AND tags.`{KIND_TAG}` = 'sweep'",
                               max_results=1)
    return found[0] if found else None


def new_parent(client: MlflowClient, experiment: str, sweep_id: str, started_ms: int | None) -> Run:
    return client.create_run(experiment, start_time=started_ms, run_name=sweep_id,
                             tags={SWEEP_TAG: sweep_id, KIND_TAG: "sweep"})


def child_runs(client: MlflowClient, experiment: str, parent: str) -> dict[str, Run]:
    """Existing cell runs of the sweep, by cell id (one search for all)."""
    runs = client.search_runs([experiment], f"tags.`{PARENT_TAG}` = '{parent}'", max_results=50_000)
    return {r.data.tags[CELL_TAG]: r for r in runs if CELL_TAG in r.data.tags}


def run_name(cell: Mapping[str, Any]) -> str:
    """A cell's run name, method first and short enough for MLflow's run list (its benchmark is the
    run's Dataset): ``flowstate · airline · smollm2-135m``. The cell's label stays its param and
    the Parquet files'."""
    return f"{cell['method']} · {cell['domain']} · {cell['model']}"


def child_run(client: MlflowClient, experiment: str, parent: str, cell: Mapping[str, Any],
              existing: Mapping[str, Run]) -> Run:
    """The cell's run: the existing one (renamed if an older version named it otherwise), else a new
    one, its identity as tags (``cell``: cell_id, cell (the label), sweep_id and the
    :data:`CELL_KEYS`); its params go with its first metrics (:func:`cell_params`)."""
    run = existing.get(cell["cell_id"])
    if run is not None:
        if run.info.run_name != run_name(cell):
            client.update_run(run.info.run_id, name=run_name(cell))
        return run
    tags = {PARENT_TAG: parent, CELL_TAG: cell["cell_id"], KIND_TAG: "cell", SWEEP_TAG: cell["sweep_id"],
            **{k: cell[k] for k in CELL_KEYS}}
    return client.create_run(experiment, run_name=run_name(cell), tags=tags)


def dataset_input(cell: Mapping[str, Any], manifest: Mapping[str, Any]) -> DatasetInput:
    """What the cell ran, as an MLflow dataset (the run list's Dataset column): ``benchmark/domain``,
    its digest that of the job's settings of that benchmark and domain (a split, a task list), its
    source the benchmark, domain and settings, its schema an episode's keys. The same for every
    cell, sweep and writer that ran it (MLflow keeps one dataset per name and digest)."""
    settings = next((b for b in manifest.get("job", {}).get("benchmarks", [])
                     if isinstance(b, dict) and (b.get("benchmark"), b.get("domain")) == (cell["benchmark"], cell["domain"])),
                    {"benchmark": cell["benchmark"], "domain": cell["domain"]})
    text = json.dumps(settings, sort_keys=True)
    schema = {"mlflow_colspec": [{"name": n, "type": "string"} for n in ("task_id", "trial")]}
    dataset = Dataset(name=f"{cell['benchmark']}/{cell['domain']}", digest=hashlib.sha256(text.encode()).hexdigest()[:8],
                      source_type="flowstate", source=text, schema=json.dumps(schema))
    return DatasetInput(dataset, tags=[InputTag("mlflow.data.context", "evaluation")])


def log_dataset(client: MlflowClient, run: Run, cell: Mapping[str, Any], manifest: Mapping[str, Any]) -> None:
    """The cell's dataset input (:func:`dataset_input`), unless the run has it already."""
    wanted = dataset_input(cell, manifest)
    logged = run.inputs.dataset_inputs if run.inputs else []
    if not any((d.dataset.name, d.dataset.digest) == (wanted.dataset.name, wanted.dataset.digest) for d in logged):
        client.log_inputs(run.info.run_id, datasets=[wanted])


def cell_params(cell: Mapping[str, Any]) -> dict[str, str]:
    return {"cell_id": cell["cell_id"], "label": cell["cell"], **{k: cell[k] for k in CELL_KEYS}}


def flat_params(prefix: str, value: Any) -> dict[str, str]:
    """Nested settings as ``prefix.key.subkey`` params (lists and unset values left out)."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in flat_params(f"{prefix}.{key}", item).items()}
    if value is None or isinstance(value, list):
        return {}
    return {prefix: str(value)[:_PARAM_MAX]}


def sweep_params(manifest: Mapping[str, Any]) -> dict[str, str]:
    job = manifest.get("job", {})
    params = {"job_name": manifest.get("job_name"), "sweep_id": manifest.get("sweep_id"),
              "code_version": manifest.get("code_version"), "trials": job.get("trials"), "seed": job.get("seed")}
    flat = {k: str(v) for k, v in params.items() if v is not None}
    flat |= flat_params("versions", manifest.get("versions", {}))
    flat |= flat_params("deployment", manifest.get("deployments", {}))
    return flat


def log_new(client: MlflowClient, run: Run, params: Mapping[str, str], metrics: Mapping[str, float], step: int) -> int:
    """Params not logged yet (MLflow params cannot change) and metrics whose value changed, in as
    few ``log_batch`` calls as MLflow allows; returns how many metrics were logged."""
    new_params = [Param(k, v) for k, v in params.items() if k not in run.data.params]
    changed = {k: v for k, v in metrics.items() if not _same(run.data.metrics.get(k), v)}
    log_batch(client, run.info.run_id, changed, step, new_params)
    return len(changed)


def _same(logged: float | None, value: float) -> bool:
    """Unchanged, up to the last bits of a float sum: DuckDB adds in parallel, in no fixed order."""
    return logged is not None and math.isclose(logged, value, rel_tol=1e-12, abs_tol=1e-15)


def log_batch(client: MlflowClient, run_id: str, metrics: Mapping[str, float], step: int,
              params: Iterable[Param] = ()) -> None:
    """Metrics (one point each, now, at ``step``) and params in batches of MLflow's size."""
    stamp = now_ms()
    points = [Metric(k, v, stamp, step) for k, v in sorted(metrics.items())]
    params = list(params)
    for i in range(0, max(len(params), len(points)), _BATCH):
        client.log_batch(run_id, params=params[i:i + _BATCH], metrics=points[i:i + _BATCH])


def reopen(client: MlflowClient, run: Run) -> None:
    """A run the sweep adds to again (a resume) is RUNNING again."""
    if run.info.status != RUNNING:
        client.update_run(run.info.run_id, status=RUNNING)


def is_terminal(status: str) -> bool:
    return RunStatus.is_terminated(RunStatus.from_string(status))


def write_config(folder: Path, sweep_dir: Path, manifest: Mapping[str, Any]) -> None:
    """The parent's ``config/`` artifacts into ``folder``: the job file, the resolved job, the manifest."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "resolved_job.json").write_text(json.dumps(manifest.get("job", {}), indent=2))
    if (sweep_dir / MANIFEST).is_file():
        shutil.copy(sweep_dir / MANIFEST, folder / MANIFEST)
    job_file = Path(manifest.get("job_file") or "")
    if job_file.is_file():
        (folder / job_file.name).write_text(redacted_job_text(job_file))
