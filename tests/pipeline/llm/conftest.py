"""Fixtures of the model-access tests: a real stub HTTP server per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pipeline.llm.kinds.replica_sim.server import StubServer


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer() as server:
        yield server
