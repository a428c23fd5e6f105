"""Shared helpers of the tests that run the real llama.cpp server."""

from __future__ import annotations

import importlib.util

import pytest

from pipeline.llm.kinds.llamacpp import smollm2_gguf


def require_llamacpp() -> None:
    """Fail (never skip): CI must run these, so a missing install is an error to see."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.fail("llama-cpp-python is not installed: pip install 'llama-cpp-python[server]' (scripts/setup.sh installs it)")
    try:
        smollm2_gguf()
    except FileNotFoundError as exc:
        pytest.fail(str(exc))
