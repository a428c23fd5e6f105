"""Fixtures shared by the whole suite: real parts, started once per session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("FLOWSTATE_DATA") or REPO_ROOT.parent / "shared" / "benchmarks")


@pytest.fixture(scope="session", autouse=True)
def mlflow_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One MLflow store for the session (its schema is created once), never ./mlflow.db of the checkout."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"
    os.environ["MLFLOW_TRACKING_URI"] = uri
    return uri


@pytest.fixture(scope="session", autouse=True)
def flowstate_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Derived files (search indexes, generated databases) in the session's own cache, not ~/.cache;
    models prepared by the set-up (scripts/setup-vllm-cpu.sh) stay where it put them."""
    from pipeline.llm.kinds.vllm.models import MODELS_ENV_VAR, models_root

    os.environ[MODELS_ENV_VAR] = str(models_root())
    path = tmp_path_factory.mktemp("cache")
    os.environ["FLOWSTATE_CACHE"] = str(path)
    return path


def start_ray(**options: object) -> None:
    """``ray.init`` as the tests want it: quiet, and the actors import this checkout."""
    import ray

    ray.init(include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": str(REPO_ROOT)}},
             **options)


@pytest.fixture(scope="session")
def ray_local() -> Iterator[None]:
    """A real local Ray instance for the whole test session (starting Ray costs ~5 s)."""
    import ray

    if not ray.is_initialized():
        start_ray(num_cpus=4)
    yield
    ray.shutdown()
