"""Model deployments: specs (what a job asks for) and the running things they start, by kind."""

from pipeline.llm.deployments.commands import cli_flags, llamacpp_command, replica_options, vllm_command
from pipeline.llm.deployments.deployment import (
    Deployment,
    EndpointDeployment,
    ReplicatedDeployment,
    ScriptedDeployment,
)
from pipeline.llm.deployments.registry import (
    DEPLOYMENT_KINDS,
    DeploymentSpec,
    make_deployment,
    register_deployment_kind,
)
from pipeline.llm.deployments.replica import ServerReplica
from pipeline.llm.deployments.scripted import SCRIPTED_POLICIES, ScriptedFactory
from pipeline.llm.deployments.specs import (
    DeploymentSpecBase,
    EndpointSpec,
    LlamaCppSpec,
    ScriptedSpec,
    VllmSpec,
    smollm2_gguf,
)
from pipeline.llm.deployments.wordllama import WordLlamaSpec

register_deployment_kind(EndpointSpec, EndpointDeployment)
register_deployment_kind(LlamaCppSpec, ReplicatedDeployment)
register_deployment_kind(VllmSpec, ReplicatedDeployment)
register_deployment_kind(ScriptedSpec, ScriptedDeployment)
register_deployment_kind(WordLlamaSpec, ReplicatedDeployment)

__all__ = [
    "DEPLOYMENT_KINDS", "SCRIPTED_POLICIES", "Deployment", "DeploymentSpec", "DeploymentSpecBase",
    "EndpointDeployment", "EndpointSpec", "LlamaCppSpec", "ReplicatedDeployment", "ScriptedDeployment",
    "ScriptedFactory", "ScriptedSpec", "ServerReplica", "VllmSpec", "WordLlamaSpec", "cli_flags", "llamacpp_command",
    "make_deployment", "register_deployment_kind", "replica_options", "smollm2_gguf", "vllm_command",
]
