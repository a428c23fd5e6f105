"""Fixtures for the pipeline tests: the τ-bench data directory and small job files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

DATA_DIR = Path(os.environ.get("FLOWSTATE_DATA") or REPO_ROOT.parent / "shared" / "benchmarks")


@pytest.fixture(scope="session", autouse=True)
def flowstate_data() -> Path:
    """Point FLOWSTATE_DATA at the benchmark data; fail (not skip) when it is missing."""
    if not (DATA_DIR / "taubench" / "airline" / "db.json").exists():
        pytest.fail(f"τ-bench data not found under {DATA_DIR}: set FLOWSTATE_DATA to the folder holding taubench/")
    os.environ["FLOWSTATE_DATA"] = str(DATA_DIR)
    return DATA_DIR
