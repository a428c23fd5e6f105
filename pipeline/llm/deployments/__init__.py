"""Model deployments: specs (what a job asks for) and the running things they start."""

from pipeline.llm.deployments.commands import cli_flags, llamacpp_command, replica_options, vllm_command
from pipeline.llm.deployments.deployment import (
    Deployment,
    EndpointDeployment,
    ReplicatedDeployment,
    ScriptedDeployment,
    make_deployment,
)
from pipeline.llm.deployments.replica import ServerReplica
from pipeline.llm.deployments.scripted import SCRIPTED_POLICIES, ScriptedFactory
from pipeline.llm.deployments.specs import (
    DeploymentSpec,
    EndpointSpec,
    LlamaCppSpec,
    ScriptedSpec,
    VllmSpec,
    smollm2_gguf,
)

__all__ = [
    "SCRIPTED_POLICIES", "Deployment", "DeploymentSpec", "EndpointDeployment", "EndpointSpec",
    "LlamaCppSpec", "ReplicatedDeployment", "ScriptedDeployment", "ScriptedFactory", "ScriptedSpec",
    "ServerReplica", "VllmSpec", "cli_flags", "llamacpp_command", "make_deployment", "replica_options",
    "smollm2_gguf", "vllm_command",
]
