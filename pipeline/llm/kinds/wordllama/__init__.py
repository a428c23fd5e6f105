"""``kind: wordllama``: WordLlama behind an OpenAI-compatible ``/v1/embeddings``, the embedded default's
embedding model.

WordLlama (MIT, ``wordllama`` on PyPI) is a table of token embeddings taken from an LLM and trained
for sentence similarity; a text's embedding is the mean of its tokens' rows. The wheel carries the
weights and the tokenizer, so nothing is downloaded, no PyTorch is needed, and a batch of 32 texts
takes a few milliseconds on one core. The server (:mod:`.server`) is the project's own; replicas run
in ``ServerReplica`` actors behind the router, like llama.cpp and vLLM.
"""

from __future__ import annotations

import sys
from typing import Any, Literal

from pydantic import Field

from pipeline.llm.deployments import ReplicatedDeployment, ReplicatedSpec, ServerKind, register_deployment_kind
from pipeline.llm.engines import EngineProfile
from pipeline.llm.kinds.wordllama.model import MODELS, WordLlamaModel


class WordLlamaSpec(ReplicatedSpec):
    """``{kind: wordllama}`` under ``deployments:``; name it under ``embeddings:``."""

    kind: Literal["wordllama"] = "wordllama"
    model: WordLlamaModel = "l2_supercat"
    # Leading dimensions kept (the weights are trained Matryoshka-style: any prefix embeds).
    dim: Literal[64, 128, 256] = 256
    embedding: Literal[True] = Field(default=True, exclude=True)  # it serves nothing else
    # Ray CPUs reserved per replica: none by default (a call takes milliseconds), so that on a
    # 2-core machine the chat models' servers keep their cores, as episode actors do.
    num_cpus: float = Field(default=0.0, ge=0)

    def identity(self) -> dict[str, Any]:
        files = MODELS[self.model]
        return {"kind": self.kind, "model": self.model, "dim": self.dim,
                "weights_sha256": files.weights_sha256, "tokenizer_sha256": files.tokenizer_sha256}

    def served_model(self) -> str:
        return f"wordllama-{self.model}-{self.dim}"


def server_command(spec: WordLlamaSpec, host: str, port: int, python: str = sys.executable) -> list[str]:
    return [python, "-m", "pipeline.llm.kinds.wordllama.server", "--host", host, "--port", str(port),
            "--model", spec.model, "--dim", str(spec.dim), "--served-model-name", spec.served_model()]


register_deployment_kind(WordLlamaSpec, ReplicatedDeployment, EngineProfile(name="wordllama"),
                         ServerKind(server_command, lambda spec: {"num_cpus": spec.num_cpus}, "/health", ("wordllama",)))

__all__ = ["WordLlamaSpec", "server_command"]
