"""A deployment kind, as a plug-in of your own: ``command_server``, any OpenAI-compatible server that
a command line starts (a server of your own, an engine this project has no kind for).

The sweep starts ``replicas`` copies of the command as Ray actors, waits until each answers on its
liveness path, routes every conversation to one of them (sticky, for prefix caches) and stops them at
the end, as it does for llama.cpp and vLLM: the replica machinery is the pipeline's; the kind says
only how to start one and what identifies its outputs.

What makes it a deployment kind (see ``pipeline/llm/deployments/registry.py``): a spec with
``kind: Literal["command_server"]`` and an :meth:`identity` (what enters episode ids), the class that
runs it (here the pipeline's :class:`~pipeline.llm.deployments.ReplicatedDeployment`), its engine's
profile (what it takes beyond the OpenAI API: nothing, here), how a replica runs (a
:class:`~pipeline.llm.deployments.ServerKind`), and :func:`~pipeline.llm.deployments.register_deployment_kind`
when the module is imported.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from pipeline.llm.deployments import ReplicatedDeployment, ReplicatedSpec, ServerKind, register_deployment_kind
from pipeline.llm.engines import EngineProfile

PLACEHOLDERS = ("{python}", "{host}", "{port}")


class CommandServerSpec(ReplicatedSpec):
    """``{kind: command_server, model: ..., command: [...]}`` under ``deployments:``."""

    kind: Literal["command_server"] = "command_server"
    # The server's command line; ``{host}`` and ``{port}`` are where it must listen (the replica picks a
    # free port), ``{python}`` the interpreter of the pipeline's environment.
    command: list[str] = Field(min_length=1)
    model: str  # the model name the server answers to
    # Ray CPUs each replica holds while it runs.
    num_cpus: float = Field(default=1.0, ge=0)

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": self.model, "command": self.command}

    def served_model(self) -> str:
        return self.model


def server_command(spec: CommandServerSpec, host: str, port: int, python: str) -> list[str]:
    """The spec's command line with its placeholders filled in."""
    values = dict(zip(PLACEHOLDERS, (python, host, str(port)), strict=True))
    argv = []
    for part in spec.command:
        for placeholder, value in values.items():
            part = part.replace(placeholder, value)
        argv.append(part)
    return argv


register_deployment_kind(
    CommandServerSpec, ReplicatedDeployment, EngineProfile(name="command_server"),
    ServerKind(server_command, lambda spec: {"num_cpus": spec.num_cpus}, liveness_path="/v1/models",
               engine_distributions=()),
)
