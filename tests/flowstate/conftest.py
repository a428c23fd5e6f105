from __future__ import annotations

from pathlib import Path

import pytest

from flowstate import FlowStateRuntime
from flowstate.data import DATA_ENV_VAR
from tests.conftest import DATA_DIR


@pytest.fixture
def runtime() -> FlowStateRuntime:
    return FlowStateRuntime()


@pytest.fixture
def released_prompts(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The data folder as ``$FLOWSTATE_DATA``, for the tests of methods that read their released prompts
    (``methods/<name>/``, pinned by SHA-256, never in the repository): skipped, naming the folder, where
    they were not fetched. No other test of the method reads the data folder."""
    if not (DATA_DIR / "methods").is_dir():
        pytest.skip(f"the methods' released prompts are not under {DATA_DIR / 'methods'} "
                    "(`flowstate data fetch methods` fetches them)")
    monkeypatch.setenv(DATA_ENV_VAR, str(DATA_DIR))
    return DATA_DIR
