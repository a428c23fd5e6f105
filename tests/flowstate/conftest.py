from __future__ import annotations

import pytest

from flowstate import FlowStateRuntime


@pytest.fixture
def runtime() -> FlowStateRuntime:
    return FlowStateRuntime()
