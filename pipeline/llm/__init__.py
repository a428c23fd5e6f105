"""Model access: one OpenAI-compatible client, deployments, a sticky router.

The stand-in server for tests and benchmarks is ``pipeline.llm.stub_server.StubServer``; it is not
imported here so that episode actors do not load uvicorn for nothing.
"""

from pipeline.llm.client import ChatClient, EmbeddingClient, Endpoints, FixedEndpoint, response_format
from pipeline.llm.deployments import (
    SCRIPTED_POLICIES,
    Deployment,
    DeploymentSpec,
    EndpointSpec,
    LlamaCppSpec,
    ScriptedFactory,
    ScriptedSpec,
    VllmSpec,
    make_deployment,
)
from pipeline.llm.errors import (
    DeploymentStartError,
    ModelError,
    ModelRequestError,
    ModelUnavailableError,
    SchemaNotEnforcedError,
)
from pipeline.llm.router import Router, RouterEndpoints, RoutingTable
from pipeline.llm.schema_check import verify_schema_enforcement
from pipeline.llm.settings import ClientSettings, Engine, RetryPolicy, SamplingParams

__all__ = [
    "SCRIPTED_POLICIES", "ChatClient", "ClientSettings", "EmbeddingClient", "Deployment", "DeploymentSpec",
    "DeploymentStartError", "EndpointSpec", "Endpoints", "Engine", "FixedEndpoint", "LlamaCppSpec",
    "ModelError", "ModelRequestError", "ModelUnavailableError", "RetryPolicy", "Router",
    "RouterEndpoints", "RoutingTable", "SamplingParams", "SchemaNotEnforcedError", "ScriptedFactory",
    "ScriptedSpec", "VllmSpec", "make_deployment", "response_format", "verify_schema_enforcement",
]
