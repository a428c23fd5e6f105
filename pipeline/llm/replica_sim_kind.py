"""``kind: replica_sim``: simulated GPU replicas behind the real router, for planning at cluster scale.

A plug-in module (name it under a job's ``plugins:``): each replica is the stand-in server in
replica mode (:mod:`pipeline.llm.replica_sim`) in its own process, run by a ``ServerReplica`` actor
behind the deployment's ``Router``, as vLLM replicas are; the client gets cached tokens in vLLM's
shape and exact token ids from the replica's vLLM-like ``/tokenize``, so a sweep records cached
tokens, reusable prefixes and physical limits as it would on vLLM. What answers is a TEST FIXTURE:
the oracle of each episode of ``oracle_job`` (the oracle-shaped workload), else an echo.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from pipeline.llm.deployments import ReplicatedDeployment, register_deployment_kind
from pipeline.llm.deployments.commands import ServerKind, register_server_kind
from pipeline.llm.deployments.specs import ReplicatedSpec
from pipeline.llm.replica_sim import ReplicaSettings
from pipeline.llm.token_ids import VllmTokens


class ReplicaSimSpec(ReplicatedSpec):
    """``{kind: replica_sim, replicas: 4, replica: {time_scale: 4}, oracle_job: JOB}``."""

    kind: Literal["replica_sim"] = "replica_sim"
    replica: ReplicaSettings = ReplicaSettings()
    # TEST FIXTURE: answer each conversation as the oracle of its episode in this job file; None: echo.
    oracle_job: Path | None = None
    model: str = "replica-sim"
    # Where each replica writes its engine's figures (``GET /sim/stats``) as JSON when it stops.
    stats_dir: Path | None = None
    check_schema_enforcement: bool = False  # a stand-in enforces no schema
    # Ray CPUs reserved per replica: none, as the stand-in stands for a GPU elsewhere.
    num_cpus: float = Field(default=0.0, ge=0)

    def identity(self) -> dict[str, Any]:
        """What answers decides the outputs; the engine's settings only decide when."""
        return {"kind": self.kind, "responder": "oracle" if self.oracle_job is not None else "echo"}

    def served_model(self) -> str:
        return self.model


def server_command(spec: ReplicaSimSpec, host: str, port: int, python: str = sys.executable) -> list[str]:
    oracle = ["--oracle-job", str(spec.oracle_job)] if spec.oracle_job is not None else []
    stats = ["--stats-out", str(spec.stats_dir / f"replica-{host}-{port}.json")] if spec.stats_dir is not None else []
    return [python, "-m", "pipeline.llm.stub_server", "--host", host, "--port", str(port), "--model", spec.model,
            "--replica", spec.replica.model_dump_json(), *oracle, *stats]


register_server_kind("replica_sim", ServerKind(server_command, lambda spec: {"num_cpus": spec.num_cpus}, "/v1/models",
                                               "flowstate", token_source=lambda spec: VllmTokens(spec.served_model())))
register_deployment_kind(ReplicaSimSpec, ReplicatedDeployment)
