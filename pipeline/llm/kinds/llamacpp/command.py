"""How a llama.cpp replica runs: ``python -m llama_cpp.server`` with the spec's settings, on its CPUs."""

from __future__ import annotations

import sys
from typing import Any

from pipeline.llm.deployments import ServerKind, cli_flags
from pipeline.llm.kinds.llamacpp.spec import LlamaCppSpec


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
    return [python, "-m", "llama_cpp.server", *cli_flags(options, dashed=False)]


def llamacpp_resources(spec: LlamaCppSpec) -> dict[str, Any]:
    return {"num_cpus": spec.num_cpus if spec.num_cpus is not None else spec.n_threads}


# llama-cpp-python's /v1/models takes the model lock, /openapi.json does not.
LLAMACPP_SERVER = ServerKind(llamacpp_command, llamacpp_resources, "/openapi.json", ("llama-cpp-python",))
