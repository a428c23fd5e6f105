"""``kind: endpoint``: a server somebody else runs (an OpenAI-compatible URL), of a registered engine."""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal

from pydantic import Field, GetJsonSchemaHandler, field_validator
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from flowstate.chat import Embedder, Policy
from flowstate.registry import UnknownPluginError
from pipeline.llm.client import ChatClient, EmbeddingClient
from pipeline.llm.deployments import Deployment, ServedSpec, register_deployment_kind
from pipeline.llm.engines import ENGINE_PROFILES, OPENAI_API, endpoint_engines
from pipeline.llm.health import wait_until_ready
from pipeline.llm.settings import SamplingParams
from pipeline.llm.token_ids import TokenizeEndpoint, TokenSource


class _EndpointEngines:
    """JSON schema of ``engine``: the registered engines an endpoint may name, as an enum."""

    def __get_pydantic_json_schema__(self, schema: core_schema.CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return {**handler(schema), "enum": endpoint_engines()}


class EndpointSpec(ServedSpec):
    """A server somebody else runs (an OpenAI-compatible URL)."""

    kind: Literal["endpoint"] = "endpoint"
    base_url: str
    model: str
    api_key_env: str | None = None  # the *name* of the variable holding the key
    # Which engine serves it (how a JSON schema is sent, where cached-token figures come from).
    engine: Annotated[str, _EndpointEngines()] = OPENAI_API.name
    startup_timeout_s: float = Field(default=30.0, gt=0)  # how long start() waits for /models
    # The served model's context length, for methods that fit their history to it; dumped only when set.
    context_length: int | None = Field(default=None, gt=0, exclude_if=lambda v: v is None)

    @field_validator("engine")
    @classmethod
    def _registered(cls, engine: str) -> str:
        try:
            known = ENGINE_PROFILES.get(engine).endpoint
        except UnknownPluginError:
            known = False
        if not known:
            raise ValueError(f"an endpoint's engine is one of {', '.join(endpoint_engines())}, not {engine!r}")
        return engine

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "engine": self.engine, "model": self.model}

    def context_tokens(self) -> int | None:
        return self.context_length

    def engine_name(self) -> str:
        return self.engine

    def token_source(self) -> TokenSource | None:
        """The server's ``/tokenize`` where its engine has one; an external server's tokenizer
        files are not at hand."""
        return TokenizeEndpoint(self.model) if self.profile().tokenize_endpoint else None


class EndpointDeployment(Deployment):
    spec: EndpointSpec

    def __getstate__(self) -> dict[str, Any]:
        """The API key travels with the deployment to the episode actors, in Ray's actor-creation
        arguments (held in memory): a Ray worker's environment is its node's, not the driver's."""
        state = dict(self.__dict__)
        if self.spec.api_key_env and os.environ.get(self.spec.api_key_env):
            state["api_key"] = os.environ[self.spec.api_key_env]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickled in an actor: the key goes into this process's environment, where the client
        reads it at each call (as in the driver)."""
        key = state.pop("api_key", None)
        self.__dict__.update(state)
        if key is not None and self.spec.api_key_env:
            os.environ[self.spec.api_key_env] = key

    def start(self) -> list[str]:
        wait_until_ready(self.spec.base_url, self.spec.startup_timeout_s, exited=lambda: None,
                         log_tail=lambda: "(external server: no log)", api_key_env=self.spec.api_key_env)
        return [self.spec.base_url]

    def policy(self, session_id: str, role: str = "agent", sampling: SamplingParams | None = None,
               context: Any = None) -> Policy:
        s = self.spec
        return ChatClient(s.base_url, s.model, profile=s.profile(), sampling=sampling or s.sampling,
                          settings=s.client, api_key_env=s.api_key_env, limit_key=s.base_url,
                          conversation=f"{session_id}/{role}", tokens=s.token_source())

    def embedder(self, session_id: str, role: str = "embeddings") -> Embedder:
        s = self.spec
        return EmbeddingClient(s.base_url, s.model, settings=s.client, api_key_env=s.api_key_env,
                               limit_key=s.base_url, conversation=f"{session_id}/{role}")

    def describe(self) -> dict[str, Any]:
        return {"kind": "endpoint", "engine": self.spec.engine, "engine_version": None,
                "model": self.spec.model, "base_url": self.spec.base_url, "replicas": 1}


register_deployment_kind(EndpointSpec, EndpointDeployment, OPENAI_API)

__all__ = ["EndpointDeployment", "EndpointSpec"]
