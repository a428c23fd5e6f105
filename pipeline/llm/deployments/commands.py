"""Server command lines and Ray resources, as pure functions (testable without a GPU)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pipeline.llm.deployments.specs import (
    VLLM_CPU_DEFAULTS,
    VLLM_DEFAULTS,
    VLLM_POOLING,
    LlamaCppSpec,
    ReplicatedSpec,
    VllmSpec,
)
from pipeline.llm.deployments.vllm_models import local_model
from pipeline.llm.token_ids import LocalTokens, TokenSource, VllmTokens


def cli_flags(options: Mapping[str, Any], style: Literal["vllm", "llamacpp"]) -> list[str]:
    """``{"max_model_len": 8192, "enforce_eager": True}`` -> ``--max-model-len 8192 --enforce-eager``.

    vLLM: dashed names, booleans as ``--flag`` / ``--no-flag``. llama_cpp.server: snake_case names
    with explicit ``true`` / ``false`` values. Mappings and lists are passed as JSON.
    """
    flags: list[str] = []
    for key, value in options.items():
        name = key.replace("_", "-") if style == "vllm" else key
        if isinstance(value, bool) and style == "vllm":
            flags.append(f"--{name}" if value else f"--no-{name}")
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, (Mapping, list)):
            text = json.dumps(value, separators=(",", ":"))
        else:
            text = str(value)
        flags += [f"--{name}", text]
    return flags


def llamacpp_command(spec: LlamaCppSpec, host: str, port: int, python: str = sys.executable) -> list[str]:
    options: dict[str, Any] = {
        "model": str(spec.gguf()),
        "model_alias": spec.served_model(),
        "host": host,
        "port": port,
        "n_threads": spec.n_threads,
        "n_ctx": spec.n_ctx,
        "use_mmap": False,  # timings were erratic with mmap on (STACK-NOTES)
        **({"embedding": True} if spec.embedding else {}),
        **spec.server_args,
    }
    return [python, "-m", "llama_cpp.server", *cli_flags(options, "llamacpp")]


def vllm_command(spec: VllmSpec, host: str, port: int, python: str = sys.executable) -> list[str]:
    """The OpenAI server module rather than the ``vllm`` CLI: the CLI looks up a distribution named
    ``vllm``, which CPU builds (``vllm-cpu``) are not; the module takes the same flags on both."""
    options: dict[str, Any] = {
        "model": local_model(spec.model),
        "host": host,
        "port": port,
        "served_model_name": spec.served_model(),
        "tensor_parallel_size": spec.tensor_parallel_size,
        **(VLLM_POOLING if spec.embedding else VLLM_DEFAULTS),
        **(VLLM_CPU_DEFAULTS if spec.cpu is not None else {}),
        **spec.engine_args,
    }
    if spec.tensor_parallel_size > 1:
        # Inside a Ray actor that already holds the GPUs; vLLM's Ray backend would ask Ray again.
        options.setdefault("distributed_executor_backend", "mp")
    engine = str(spec.python) if spec.python is not None else python
    return [engine, "-m", "vllm.entrypoints.openai.api_server", *cli_flags(options, "vllm")]


def vllm_environment(spec: VllmSpec, index: int, cores: Sequence[int]) -> dict[str, str]:
    """What a replica's server gets in its environment beyond the actor's. On GPUs nothing: Ray's
    CUDA_VISIBLE_DEVICES names the replica's GPUs. On CPUs: the KV cache's size, and the cores its
    threads are bound to (replica ``index`` takes ``threads`` of the node's ``cores`` from
    ``index * threads`` on, wrapping round), where vLLM would bind every server to the same ones."""
    if spec.cpu is None:
        return {}
    threads = spec.cpu.threads
    bound = sorted({cores[(index * threads + i) % len(cores)] for i in range(threads)})
    return {"VLLM_CPU_KVCACHE_SPACE": str(spec.cpu.kv_cache_gib),
            "VLLM_CPU_OMP_THREADS_BIND": ",".join(map(str, bound))}


@dataclass(frozen=True)
class ServerKind:
    """How a replica of one served kind runs: its command line, the Ray resources it holds, where
    it answers "is the process up" without waiting behind a running request, its Python package."""

    # (spec, host, port, python) -> argv, whose first item is the interpreter of the engine's environment.
    command: Callable[[Any, str, int, str], list[str]]
    resources: Callable[[Any], dict[str, Any]]
    liveness_path: str
    # The distributions that may provide the engine (the first installed one is recorded, with its version).
    engine_distributions: tuple[str, ...]
    # Where exact prefix accounting gets the engine's token ids (None: the figures stay null).
    token_source: Callable[[Any], TokenSource | None] = lambda spec: None
    # (spec, replica index, the node's cores) -> variables added to the server's environment.
    environment: Callable[[Any, int, Sequence[int]], dict[str, str]] = lambda spec, index, cores: {}


SERVER_KINDS: dict[str, ServerKind] = {}


def register_server_kind(kind: str, server: ServerKind) -> None:
    """Let :class:`~pipeline.llm.deployments.replica.ServerReplica` run servers of ``kind``."""
    SERVER_KINDS[kind] = server


def server_kind(spec: ReplicatedSpec) -> ServerKind:
    return SERVER_KINDS[spec.kind]


def server_command(spec: ReplicatedSpec, host: str, port: int, python: str = sys.executable) -> list[str]:
    return server_kind(spec).command(spec, host, port, python)


def replica_options(spec: ReplicatedSpec) -> dict[str, Any]:
    """``ServerReplica.options(...)``: the resources the server uses, replicas spread over nodes.

    No restarts: a dead replica is taken out by the router instead of coming back on another port.
    """
    return {**server_kind(spec).resources(spec), "scheduling_strategy": "SPREAD", "max_restarts": 0}


def _llamacpp_resources(spec: LlamaCppSpec) -> dict[str, Any]:
    return {"num_cpus": spec.num_cpus if spec.num_cpus is not None else spec.n_threads}


def _vllm_resources(spec: VllmSpec) -> dict[str, Any]:
    """A vLLM replica holds ``tensor_parallel_size`` GPUs of one node (one actor lives on one node;
    Ray sets CUDA_VISIBLE_DEVICES, which the server inherits), or on CPUs the cores it computes on."""
    if spec.cpu is not None:
        return {"num_cpus": spec.cpu.ray_cpus(), "num_gpus": 0}
    return {"num_cpus": 1, "num_gpus": spec.tensor_parallel_size}


# llama-cpp-python's /v1/models takes the model lock, /openapi.json does not.
register_server_kind("llamacpp", ServerKind(llamacpp_command, _llamacpp_resources, "/openapi.json", ("llama-cpp-python",),
                                            token_source=lambda spec: LocalTokens(str(spec.gguf()))))
register_server_kind("vllm", ServerKind(vllm_command, _vllm_resources, "/health", ("vllm", "vllm-cpu"),
                                        token_source=lambda spec: VllmTokens(spec.served_model()),
                                        environment=vllm_environment))
