"""Model access: one OpenAI-compatible client, deployments, a sticky router.

Generic code only: each deployment kind is a folder under :mod:`pipeline.llm.kinds` that registers
itself (its spec, the class that runs it, its engine's profile) when imported, and is found through
the entry points like any plug-in.
"""

from pipeline.llm.client import ChatClient, EmbeddingClient, Endpoints, FixedEndpoint, response_format
from pipeline.llm.deployments import Deployment, DeploymentSpec, make_deployment
from pipeline.llm.engines import ENGINE_PROFILES, EngineProfile
from pipeline.llm.errors import (
    DeploymentStartError,
    ModelError,
    ModelRequestError,
    ModelUnavailableError,
    SchemaNotEnforcedError,
)
from pipeline.llm.router import Router, RouterEndpoints, RoutingTable
from pipeline.llm.schema_check import verify_schema_enforcement
from pipeline.llm.scripted_policies import SCRIPTED_POLICIES, ScriptedFactory
from pipeline.llm.settings import ClientSettings, RetryPolicy, SamplingParams

__all__ = [
    "ENGINE_PROFILES", "SCRIPTED_POLICIES", "ChatClient", "ClientSettings", "Deployment", "DeploymentSpec",
    "DeploymentStartError", "EmbeddingClient", "EngineProfile", "Endpoints", "FixedEndpoint", "ModelError",
    "ModelRequestError", "ModelUnavailableError", "RetryPolicy", "Router", "RouterEndpoints", "RoutingTable",
    "SamplingParams", "SchemaNotEnforcedError", "ScriptedFactory", "make_deployment", "response_format",
    "verify_schema_enforcement",
]
