"""How a replica of each served kind runs, by kind: command line, Ray resources, liveness, environment.

Pure functions of a spec (testable without a GPU or a server); each kind registers its
:class:`ServerKind` with the kind (:func:`pipeline.llm.deployments.registry.register_deployment_kind`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flowstate.registry import Registry
from pipeline.llm.deployments.specs import ReplicatedSpec


def cli_flags(options: Mapping[str, Any], *, dashed: bool) -> list[str]:
    """``{"max_model_len": 8192, "enforce_eager": True}`` as a server's command-line flags.

    ``dashed`` (argparse's style): ``--max-model-len 8192 --enforce-eager``, a false boolean as
    ``--no-flag``. Otherwise (pydantic-settings' style): snake_case names, booleans as explicit
    ``true`` / ``false`` values. Mappings and lists are passed as JSON.
    """
    flags: list[str] = []
    for key, value in options.items():
        name = key.replace("_", "-") if dashed else key
        if isinstance(value, bool) and dashed:
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
    # (spec, replica index, the node's cores) -> variables added to the server's environment.
    environment: Callable[[Any, int, Sequence[int]], dict[str, str]] = lambda spec, index, cores: {}


SERVER_KINDS: Registry[ServerKind] = Registry("server kind")


def server_kind(spec: ReplicatedSpec) -> ServerKind:
    return SERVER_KINDS.get(spec.kind)


def server_command(spec: ReplicatedSpec, host: str, port: int, python: str = sys.executable) -> list[str]:
    return server_kind(spec).command(spec, host, port, python)


def replica_options(spec: ReplicatedSpec) -> dict[str, Any]:
    """``ServerReplica.options(...)``: the resources the server uses, replicas spread over nodes.

    No restarts: a dead replica is taken out by the router instead of coming back on another port.
    """
    return {**server_kind(spec).resources(spec), "scheduling_strategy": "SPREAD", "max_restarts": 0}
