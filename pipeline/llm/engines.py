"""What tells engines apart, as data: one profile per engine, declared by the deployment kind that runs it.

Every engine speaks the OpenAI API; a profile lists where one differs from it (how it takes a JSON
schema, the names of the optional sampling settings, the thinking switch, whether it reports cached
tokens and usage, whether it tokenizes chat messages over HTTP), so that the client and the run
read capabilities instead of comparing engine names. Each deployment kind registers its engine's
profile with the kind (:func:`pipeline.llm.deployments.registry.register_deployment_kind`); the
profile's ``name`` is the ``engine`` that deployments describe and manifests record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict

from flowstate.registry import Registry

# The optional sampling settings of a job (pipeline.core.specs.Sampling) that the OpenAI API itself
# takes, under their own names: sent to every engine.
OPENAI_SAMPLING: Mapping[str, str] = {"frequency_penalty": "frequency_penalty"}


class EngineProfile(BaseModel):
    """An engine's capabilities and quirks, relative to the OpenAI API."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    # A server somebody else runs may be of this engine (``kind: endpoint``'s ``engine:``).
    endpoint: bool = False
    # How a JSON schema is sent: OpenAI's ``{"type": "json_schema", ...}``, or a JSON object with the
    # schema beside it, ``{"type": "json_object", "schema": ...}`` (the form some engines enforce).
    response_format: Literal["json_schema", "json_object"] = "json_schema"
    # The job's optional sampling settings the engine takes (the job's name -> the request's name).
    sampling_names: Mapping[str, str] = OPENAI_SAMPLING
    # Takes ``chat_template_kwargs: {enable_thinking: ...}`` (models with a thinking mode).
    thinking_switch: bool = False
    # Reports no cached tokens: the client estimates them from the prompt the server saw before.
    estimates_cached_prefix: bool = False
    # Its calls report token usage (False: counted by the job's tokenizer where it names one).
    reports_usage: bool = True
    # Answers ``POST /tokenize`` with chat messages beside ``/v1`` (exact prefix accounting).
    tokenize_endpoint: bool = False


#: The OpenAI API as such: what a client assumes of a server it knows nothing more about.
OPENAI_API = EngineProfile(name="openai", endpoint=True)

ENGINE_PROFILES: Registry[EngineProfile] = Registry("engine")


def endpoint_engines() -> list[str]:
    """The engines a ``kind: endpoint`` deployment may name."""
    return [name for name in ENGINE_PROFILES.names() if ENGINE_PROFILES.get(name).endpoint]
