"""Fixtures for the pipeline tests: the τ-bench data directory and small job files."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import DATA_DIR, REPO_ROOT

__all__ = ["DATA_DIR", "REPO_ROOT"]


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
