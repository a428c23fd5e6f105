"""The MemoryArena material: contract strings, the travel database and the synthetic examples (test data,
not benchmark data) from the data directory the suite uses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.benchmarks.memoryarena.data import CONFIGS, Config, load_tasks, task_file
from tests.pipeline.conftest import DATA_DIR

MEMORYARENA = DATA_DIR / "memoryarena"
TRAVEL_DB = MEMORYARENA / "travel_db"


@pytest.fixture(scope="session", autouse=True)
def memoryarena_data(flowstate_data: Path) -> Path:
    """Fail (not skip) when the MemoryArena folder is missing."""
    if not (MEMORYARENA / "CONTRACT.md").is_file():
        pytest.fail(f"MemoryArena data not found under {MEMORYARENA}")
    return MEMORYARENA


def example_tasks(config: Config) -> list:
    return load_tasks(task_file(config, "examples", DATA_DIR), config)


def catalog() -> dict:
    products = json.loads((MEMORYARENA / "examples" / "bundled_shopping.synthetic_catalog.json").read_text())["products"]
    return {p["asin"]: p for p in products}


ALL_CONFIGS = CONFIGS
