"""Hand-made sweep directories with the real Parquet schemas, for the analysis tests.

Rows are plain dicts with every id column filled in; any column not given is NULL (or an empty list
for list columns). Files are laid out as the store writes them: one file per table and episode
under ``<table>/cell=<cell_id>/<episode_id>.parquet``. Episodes take τ-bench's metrics (db,
communicate, ...) as keyword arguments and put them in the ``metrics`` map, as its grading does.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline.store.schema import SCHEMA_VERSION
from pipeline.store.tables import ANALYSIS_SCHEMAS
from pipeline.store.writer import write_parquet_atomic

T0 = datetime(2026, 1, 1, tzinfo=UTC)
METRIC_KEYS = ("db", "communicate", "nl_assertion", "action", "action_read", "action_write")


def _hash(*parts: object) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:12]


def table_of(table: str, rows: list[dict[str, Any]]) -> pa.Table:
    schema = ANALYSIS_SCHEMAS[table]
    full = [{f.name: ([] if pa.types.is_list(f.type) else None) for f in schema} | row for row in rows]
    return pa.Table.from_pylist(full, schema=schema)


@dataclass
class SweepBuilder:
    root: Path
    sweep_id: str = "sweep-a"
    benchmark: str = "taubench"
    written: list[str] = field(default_factory=list)

    @property
    def sweep_dir(self) -> Path:
        return self.root / self.sweep_id

    def ids(self, *, domain: str, method: str, model: str, task: str, trial: int) -> dict[str, Any]:
        cell_id = _hash(self.benchmark, domain, method, model)
        return {
            "schema_version": SCHEMA_VERSION, "sweep_id": self.sweep_id, "cell_id": cell_id,
            "cell": f"{self.benchmark}.{domain}.{method}.{model}",
            "episode_id": _hash(self.sweep_id, cell_id, task, trial), "task_id": task, "trial": trial,
            "benchmark": self.benchmark, "domain": domain, "method": method, "model": model,
        }

    def write(self, table: str, ids: dict[str, Any], rows: list[dict[str, Any]]) -> Path:
        path = self.sweep_dir / table / f"cell={ids['cell_id']}" / f"{ids['episode_id']}.parquet"
        write_parquet_atomic(path, table_of(table, [{**ids, **r} for r in rows]), [ids["episode_id"]])
        return path

    def episode(self, *, domain: str = "airline", method: str = "full_context", model: str = "m1",
                task: str = "0", trial: int = 0, status: str = "completed", reward: float | None = 1.0,
                steps: list[dict[str, Any]] | None = None, transcript: list[dict[str, Any]] | None = None,
                messages: list[dict[str, Any]] | None = None, request_outcomes: list[dict[str, Any]] | None = None,
                write_episode_row: bool = True, **episode: Any) -> dict[str, Any]:
        """Write one episode's files, episodes row last (as the store does); returns its id columns."""
        ids = self.ids(domain=domain, method=method, model=model, task=task, trial=trial)
        extra = {"steps": steps, "transcript": transcript, "messages": messages, "request_outcomes": request_outcomes}
        for table, rows in extra.items():
            if rows:
                self.write(table, ids, rows)
        if write_episode_row:
            graded = status == "completed" and episode.get("termination", "user_stop") in ("user_stop", "agent_stop")
            metrics = {k: v for k in METRIC_KEYS if (v := episode.pop(k, None)) is not None}
            tokens = [episode.get(f"{role}_{kind}_tokens") for role in ("agent", "memory") for kind in ("prompt", "completion")]
            row = {
                "seed": 1, "status": status, "attempts": 1, "termination": "user_stop",
                "reward": reward if status == "completed" else None,
                "success": (abs(reward - 1.0) <= 1e-6) if status == "completed" and reward is not None else None,
                "grading_basis": "task: DB×COMMUNICATE", "graded": graded,
                "metrics": metrics if status == "completed" else None,
                "tokens": sum(t for t in tokens if t is not None) if any(t is not None for t in tokens) else None,
                "n_requests": max([s.get("request", 1) for s in steps or [{}]]),
                "n_steps": len(steps or []),
                "started_at": T0, "finished_at": T0 + timedelta(seconds=10), "duration_s": 10.0,
                "code_version": "test",
            } | episode
            self.write("episodes", ids, [row])
            self.written.append(ids["episode_id"])
        return ids

    def manifest(self, **extra: Any) -> dict[str, Any]:
        cells = sorted({(i["cell_id"], i["cell"]) for i in self._cells()})
        manifest = {
            "sweep_id": self.sweep_id, "job_name": "test-job", "job_file": str(self.root / "job.yaml"),
            "job": {"name": "test-job", "trials": 2, "seed": 300, "tracking": {"experiment": None, "tracking_uri": None,
                                                                            "trace_samples_per_cell": 3},
                    "analysis": {"baseline": "full_context"}},
            "created_at": T0.isoformat(), "code_version": "abc123", "versions": {"python": "3.11", "duckdb": "2.0"},
            "data_checksums": {}, "cells": [{"cell_id": c, "label": label} for c, label in cells],
            "episodes": len(self.written), "deployments": {"m1": {"kind": "scripted", "engine": "scripted", "model": "m1"}},
            "mlflow_run_id": None, "runs": [],
        } | extra
        self.sweep_dir.mkdir(parents=True, exist_ok=True)
        (self.sweep_dir / "manifest.json").write_text(json.dumps(manifest, indent=2))
        return manifest

    def _cells(self) -> list[dict[str, Any]]:
        import pyarrow.parquet as pq

        files = sorted((self.sweep_dir / "episodes").glob("*/*.parquet"))
        return [r for f in files for r in pq.read_table(f, columns=["cell_id", "cell"]).to_pylist()]
