"""Model deployments, whatever their kind: the spec bases, the running things they start, the replica
actor and the registries of kinds. The kinds themselves are folders under :mod:`pipeline.llm.kinds`."""

from pipeline.llm.deployments.deployment import Deployment, ReplicatedDeployment
from pipeline.llm.deployments.registry import (
    DEPLOYMENT_KINDS,
    DeploymentSpec,
    make_deployment,
    register_deployment_kind,
)
from pipeline.llm.deployments.replica import ServerReplica
from pipeline.llm.deployments.servers import SERVER_KINDS, ServerKind, cli_flags, replica_options
from pipeline.llm.deployments.specs import DeploymentSpecBase, ReplicatedSpec, ServedSpec

__all__ = [
    "DEPLOYMENT_KINDS", "SERVER_KINDS", "Deployment", "DeploymentSpec", "DeploymentSpecBase", "ReplicatedDeployment",
    "ReplicatedSpec", "ServedSpec", "ServerKind", "ServerReplica", "cli_flags", "make_deployment",
    "register_deployment_kind", "replica_options",
]
