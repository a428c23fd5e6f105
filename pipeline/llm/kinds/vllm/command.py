"""How a vLLM replica runs: its OpenAI server module, the GPUs (or CPU cores) it holds, its environment."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from pipeline.llm.deployments import ServerKind, cli_flags
from pipeline.llm.kinds.vllm.models import local_model
from pipeline.llm.kinds.vllm.spec import VLLM_CPU_DEFAULTS, VLLM_DEFAULTS, VLLM_POOLING, VllmSpec


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
    return [engine, "-m", "vllm.entrypoints.openai.api_server", *cli_flags(options, dashed=True)]


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


def vllm_resources(spec: VllmSpec) -> dict[str, Any]:
    """A vLLM replica holds ``tensor_parallel_size`` GPUs of one node (one actor lives on one node;
    Ray sets CUDA_VISIBLE_DEVICES, which the server inherits), or on CPUs the cores it computes on."""
    if spec.cpu is not None:
        return {"num_cpus": spec.cpu.ray_cpus(), "num_gpus": 0}
    return {"num_cpus": 1, "num_gpus": spec.tensor_parallel_size}


VLLM_SERVER = ServerKind(vllm_command, vllm_resources, "/health", ("vllm", "vllm-cpu"), environment=vllm_environment)
