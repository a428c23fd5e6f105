"""The manifest of a sweep (``manifest.json``): reading it, checked against the shape its readers rely
on, and the updates after the run's start (MLflow run id, finishing steps). A run writes it at its
start through :mod:`pipeline.run.manifest`; these two modules are its only writers."""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from flowstate.errors import FlowStateError
from pipeline.core.atomic import write_json_atomic
from pipeline.core.catalog import BenchmarkCatalog
from pipeline.core.cost import CostModel

MANIFEST = "manifest.json"
# The finishing steps done since the episodes last changed (a rerun with nothing to do skips them).
FINISHED = "finished"
FinishingStep = Literal["compacted", "tracked"]
_PACKAGES = ("flowstate", "ray", "pyarrow", "duckdb", "mlflow", "pydantic", "aiohttp", "llama_cpp_python", "vllm")


@cache
def code_version() -> str:
    """The git commit of the project (``+dirty`` with local changes), else the package version."""
    root = Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                                capture_output=True, text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
        return commit + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return f"flowstate-{package_versions().get('flowstate', 'unknown')}"


@cache
def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name.replace("_", "-"))
        except metadata.PackageNotFoundError:
            continue
    return versions


@cache
def prompt_templates_hash() -> str:
    """sha256 over the prompt templates (name and bytes of each): what the prompts of a sweep were built from."""
    from importlib import resources

    digest = hashlib.sha256()
    files = sorted((f for f in resources.files("flowstate.prompts").iterdir() if f.name.endswith(".txt")),
                   key=lambda f: f.name)
    for f in files:
        digest.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return digest.hexdigest()


class ManifestError(FlowStateError, ValueError):
    """A manifest that cannot be this sweep's: not JSON, not shaped as a manifest, or another sweep's."""


class _Open(BaseModel):
    """Checks the types of the keys it names and keeps any other (a manifest of a later version)."""

    model_config = ConfigDict(extra="allow")


class _Tracking(_Open):
    experiment: str | None = None
    tracking_uri: str | None = None
    trace_samples_per_cell: int | None = None


class _Analysis(_Open):
    baseline: str | None = None
    count_tokens: str | None = None
    cost_model: CostModel | None = None


class _Agent(_Open):
    deployment: str
    label: str | None = None


class _Job(_Open):
    name: str | None = None
    plugins: list[str] = []
    trials: int | None = None
    seed: int | None = None
    agents: list[_Agent] = []
    deployments: dict[str, dict[str, Any]] = {}
    tracking: _Tracking | None = None
    analysis: _Analysis | None = None


class _Manifest(_Open):
    """What the readers of a manifest rely on: a hand-edited one that breaks it is refused at once,
    naming the key, instead of failing deep inside a command."""

    sweep_id: str
    job_name: str | None = None
    job_file: str | None = None
    job: _Job = _Job()
    cost_models: dict[str, CostModel] = {}  # each agent model's default, as the run recorded it
    created_at: str | None = None
    code_version: str | None = None
    versions: dict[str, Any] = {}
    cells: list[dict[str, Any]] = []
    episodes: int = 0
    deployments: dict[str, Any] = {}
    mlflow_run_id: str | None = None
    finished: dict[str, dict[str, Any]] = {}
    runs: list[dict[str, Any]] = []
    benchmark_catalogs: dict[str, BenchmarkCatalog] = {}


# How a hand edit broke a key, in a few words (pydantic's own message otherwise).
_WHY = {"missing": "missing", "dict_type": "not a JSON object", "model_type": "not a JSON object",
        "list_type": "not a list", "tuple_type": "not a list", "string_type": "not a string",
        "int_type": "not a whole number", "int_parsing": "not a whole number"}


def _load(path: Path) -> tuple[dict[str, Any], _Manifest]:
    """The manifest at ``path`` as written and as checked; an error naming the file and the key."""
    move_away = "move it away (the results beside it are intact, and a run writes a new one)"
    try:
        manifest = json.loads(path.read_text())
    except (ValueError, OSError) as exc:
        raise ManifestError(f"{path} is not a readable manifest ({exc}); {move_away}") from None
    if not isinstance(manifest, dict):
        raise ManifestError(f"{path} is not a manifest (a JSON object); move it away")
    try:
        return manifest, _Manifest.model_validate(manifest)
    except ValidationError as exc:
        error = exc.errors()[0]
        key = ".".join(str(part) for part in error["loc"])
        why = _WHY.get(error["type"], error["msg"])
        raise ManifestError(f"{path}: {key}: {why} (a hand edit?); {move_away}") from None


def read_manifest(sweep_dir: Path) -> dict[str, Any] | None:
    """The sweep's manifest; None when there is none. Not JSON, or not shaped as a manifest (a cut
    copy, a hand edit): an error that names it."""
    path = sweep_dir / MANIFEST
    return _load(path)[0] if path.exists() else None


def recorded_catalogs(sweep_dir: Path) -> dict[str, BenchmarkCatalog]:
    """The catalogs of the benchmarks the sweep ran, as its manifest recorded them (none: a sweep
    written before manifests held them, or no manifest)."""
    path = sweep_dir / MANIFEST
    return _load(path)[1].benchmark_catalogs if path.exists() else {}


def check_manifest_belongs(sweep_dir: Path, sweep_id: str) -> None:
    """Refuse to resume into a folder whose manifest is another sweep's (copied or renamed folders)."""
    manifest = read_manifest(sweep_dir)
    if manifest is not None and manifest.get("sweep_id") != sweep_id:
        raise ManifestError(f"{sweep_dir / MANIFEST} belongs to sweep {manifest.get('sweep_id')!r} (job "
                            f"{manifest.get('job_name')!r}), not to {sweep_id!r}: this folder holds another sweep's "
                            "results; give the run another --out, or move the folder")


def _update(sweep_dir: Path, change: Callable[[dict[str, Any]], bool]) -> None:
    """Read the manifest once, let ``change`` edit it, write it back if it says so (no manifest: nothing to do)."""
    manifest = read_manifest(sweep_dir)
    if manifest is not None and change(manifest):
        write_json_atomic(sweep_dir / MANIFEST, manifest)


def record_mlflow_run(sweep_dir: Path, run_id: str) -> None:
    """Remember the sweep's MLflow parent run, so that re-logging finds it."""
    def change(manifest: dict[str, Any]) -> bool:
        if manifest.get("mlflow_run_id") == run_id:
            return False
        manifest["mlflow_run_id"] = run_id
        return True

    _update(sweep_dir, change)


def _finished(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    finished = manifest.get(FINISHED)
    return finished if isinstance(finished, dict) else {}


def finished_steps(sweep_dir: Path) -> dict[str, dict[str, Any]]:
    """The finishing steps done since the episodes last changed: ``{step: {"at": ..., ...}}``."""
    return _finished(read_manifest(sweep_dir) or {})


def record_finished(sweep_dir: Path, step: FinishingStep, **details: Any) -> None:
    """Note that ``step`` finished over the sweep's current episodes."""
    def change(manifest: dict[str, Any]) -> bool:
        manifest[FINISHED] = {**_finished(manifest), step: {"at": datetime.now(UTC).isoformat(), **details}}
        return True

    _update(sweep_dir, change)


def forget_finished(sweep_dir: Path) -> None:
    """The episodes changed outside a run (a regrade): compaction and tracking are owed again."""
    def change(manifest: dict[str, Any]) -> bool:
        if not _finished(manifest):
            return False
        manifest[FINISHED] = {}
        return True

    _update(sweep_dir, change)
