"""Loading WordLlama from the files its wheel ships, checked against pinned SHA-256.

``wordllama.WordLlama.load`` looks for the bundled tokenizer in a folder the wheel does not have
(``tokenizer/`` against the shipped ``tokenizers/``) and then downloads it from Hugging Face, so
this loads the two files itself and hands them to the package's own inference class.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from flowstate.errors import FlowStateError

WordLlamaModel = Literal["l2_supercat"]


class ModelFiles(BaseModel):
    """Where in the ``wordllama`` package a model's files are, and what they must hash to."""

    model_config = ConfigDict(frozen=True)

    weights: str
    weights_sha256: str
    tokenizer: str
    tokenizer_sha256: str


# wordllama 0.4.0.post1 (pinned in pyproject.toml).
MODELS: dict[str, ModelFiles] = {
    "l2_supercat": ModelFiles(
        weights="weights/l2_supercat_256.safetensors",
        weights_sha256="64b47a2dc493cb8e85944076601189739852d7b64e0e1eedcb1937a251cd9fd5",
        tokenizer="tokenizers/l2_supercat_tokenizer_config.json",
        tokenizer_sha256="93248f2a9ec36c7b35f700a033d5f36228aae48db61aee31007fa49062cdeb68",
    ),
}


class ModelFileError(FlowStateError, RuntimeError):
    """A model file is missing or is not the pinned one."""


def _package_dir() -> Path:
    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise ModelFileError("the wordllama package is not installed: pip install wordllama==0.4.0.post1")
    return Path(next(iter(spec.submodule_search_locations)))


def verified_file(relative: str, sha256: str) -> Path:
    path = _package_dir() / relative
    if not path.is_file():
        raise ModelFileError(f"{path} is missing: reinstall wordllama==0.4.0.post1")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != sha256:
        raise ModelFileError(f"{path} has SHA-256 {digest}, expected {sha256}: reinstall wordllama==0.4.0.post1")
    return path


class TextEmbedder:
    """Unit-length embeddings of texts, and their token counts (what ``usage`` reports)."""

    def __init__(self, model: WordLlamaModel = "l2_supercat", dim: int = 256) -> None:
        from safetensors import safe_open
        from tokenizers import Tokenizer
        from wordllama.inference import WordLlamaInference

        files = MODELS[model]
        with safe_open(str(verified_file(files.weights, files.weights_sha256)), framework="np") as weights:
            table = weights.get_tensor("embedding.weight")[:, :dim]
        tokenizer = Tokenizer.from_file(str(verified_file(files.tokenizer, files.tokenizer_sha256)))
        self._inference = WordLlamaInference(table, tokenizer)
        self.dim = dim

    def embed(self, texts: list[str]) -> np.ndarray:
        """One row per text; a text without tokens embeds as zeros (its mean is undefined)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        tokens = self.token_counts(texts)
        filled = [i for i, n in enumerate(tokens) if n > 0]
        if filled:
            out[filled] = self._inference.embed([texts[i] for i in filled], norm=True)
        return out

    def token_counts(self, texts: list[str]) -> list[int]:
        encodings = self._inference.tokenizer.encode_batch(texts, add_special_tokens=False)
        return [sum(encoding.attention_mask) for encoding in encodings]  # padded to the longest
