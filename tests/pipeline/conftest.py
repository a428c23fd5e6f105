"""Fixtures for the pipeline tests: the τ-bench data directory and small job files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import DATA_DIR, REPO_ROOT

__all__ = ["DATA_DIR", "REPO_ROOT"]


@pytest.fixture(scope="session", autouse=True)
def flowstate_data() -> Path:
    """Point FLOWSTATE_DATA at the benchmark data; fail (not skip) when it is missing."""
    if not (DATA_DIR / "taubench" / "airline" / "db.json").exists():
        pytest.fail(f"τ-bench data not found under {DATA_DIR}: set FLOWSTATE_DATA to the folder holding taubench/")
    os.environ["FLOWSTATE_DATA"] = str(DATA_DIR)
    return DATA_DIR


SMALL_ORACLE_JOB = {
    "name": "small-oracle",
    "benchmarks": [{"benchmark": "taubench", "domain": "airline", "tasks": ["0", "7"], "reward_basis": "classic"},
                   {"benchmark": "taubench", "domain": "retail", "tasks": ["0", "36"], "reward_basis": "classic"}],
    "methods": [{"name": "flowstate"}, {"name": "full_context"}],
    "agents": [{"deployment": "oracle"}],
    "user_simulator": "scripted",
    "judge": "none",
    "deployments": {"oracle": {"kind": "scripted", "name": "oracle"}},
    "execution": {"concurrency": 8},
    "analysis": {"baseline": "full_context"},
}


@pytest.fixture(scope="session")
def oracle_sweep(ray_local, tmp_path_factory) -> Path:
    """A finished small sweep of the oracle fixture (8 episodes); tests must not modify it."""
    import yaml

    from pipeline.run.launch import run_sweep

    folder = tmp_path_factory.mktemp("oracle-sweep")
    job = folder / "small-oracle.yaml"
    job.write_text(yaml.safe_dump(SMALL_ORACLE_JOB))
    result = run_sweep(job, out=folder / "runs")
    assert result.completed == 8
    return result.sweep_dir
