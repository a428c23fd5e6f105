"""A sweep's manifest as a run writes it at its start: resolved job (secrets redacted), the agents' cost
models, versions, data checksums, prompt-template hashes, the benchmarks' catalogs, deployments, and a
log of runs.
Reading and later updates (MLflow run id, finishing steps) are :mod:`pipeline.store.manifest`'s."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from flowstate.methods.layout import layout_of, layout_sha256
from pipeline.config.sweep import Sweep
from pipeline.core.atomic import write_json_atomic
from pipeline.core.catalog import CATALOGS
from pipeline.run.models import agent_cost_models
from pipeline.store.manifest import (
    FINISHED,
    MANIFEST,
    code_version,
    package_versions,
    prompt_templates_hash,
    read_manifest,
)


def prompt_layouts(sweep: Sweep) -> dict[str, dict[str, str]]:
    """Per cell whose method has a prompt layout (FlowState's ``prompt_layout``): the layout and the
    hash of what its inputs are built from (its template and Active State order)."""
    return {cell.cell_id: {"layout": layout.value, "sha256": layout_sha256(layout)}
            for cell in sweep.cells if (layout := layout_of(cell.method)) is not None}


def benchmark_catalogs(sweep: Sweep) -> dict[str, dict[str, Any]]:
    """The catalog of each benchmark the sweep runs (what readers need of it, so that they never
    import a plug-in: :class:`~pipeline.benchmarks.base.BenchmarkCatalog`)."""
    names = sorted({cell.benchmark.benchmark for cell in sweep.cells})
    return {name: CATALOGS.get(name).model_dump(mode="json") for name in names}


def write_manifest(sweep: Sweep, sweep_dir: Path, *, job_path: Path, deployments: dict[str, Any] | None = None,
                   run: dict[str, Any] | None = None, unfinished: bool = False) -> dict[str, Any]:
    """Create or update the manifest; earlier runs of the same sweep are kept in ``runs``.
    ``unfinished``: episodes are about to change, so compaction and tracking are owed again.
    The job and the deployments are written with the job's secrets redacted (:mod:`pipeline.config.secrets`)."""
    previous = read_manifest(sweep_dir) or {}
    secrets = sweep.job.secrets()
    manifest = {
        "sweep_id": sweep.sweep_id,
        "job_name": sweep.job.name,
        "job_file": str(job_path),
        "job": secrets.redact(sweep.job.model_dump(mode="json")),
        # Each agent model's default cost model, declared by its deployment's kind (pipeline.core.cost).
        "cost_models": {label: model.model_dump(mode="json") for label, model in agent_cost_models(sweep.job).items()},
        "created_at": previous.get("created_at", datetime.now(UTC).isoformat()),
        "code_version": code_version(),
        "prompt_templates_sha256": prompt_templates_hash(),
        "prompt_layouts": prompt_layouts(sweep),
        "versions": package_versions(),
        "data_checksums": sweep.data_checksums,
        "cells": [{"cell_id": c.cell_id, "label": c.label} for c in sweep.cells],
        "benchmark_catalogs": benchmark_catalogs(sweep),
        "episodes": len(sweep.episodes),
        "deployments": secrets.redact(deployments) if deployments else previous.get("deployments", {}),
        "mlflow_run_id": previous.get("mlflow_run_id"),
        FINISHED: {} if unfinished else previous.get(FINISHED, {}),
        "runs": previous.get("runs", []) + ([run] if run else []),
    }
    write_json_atomic(sweep_dir / MANIFEST, manifest)
    return manifest


