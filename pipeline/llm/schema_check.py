"""Start-up check that a server really enforces JSON schemas (vLLM ignores forms it dropped)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from flowstate.chat import ChatMessage, Policy
from pipeline.llm.errors import SchemaNotEnforcedError


class _Probe(BaseModel):
    model_config = ConfigDict(extra="forbid", title="probe")

    answer: Literal["yes", "no"]


# A request whose natural answer is prose: only an enforced schema turns it into the probe object.
_PROBE_MESSAGES = [ChatMessage(role="user", content="Say hello in one short sentence.")]


async def verify_schema_enforcement(policy: Policy) -> None:
    """Raise :class:`SchemaNotEnforcedError` unless the reply to a prose request fits a tiny schema."""
    completion = await policy.complete(_PROBE_MESSAGES, json_schema=_Probe.model_json_schema())
    try:
        _Probe.model_validate_json(completion.text)
    except ValidationError as exc:
        raise SchemaNotEnforcedError(
            f"the server ignored the JSON schema (reply {completion.text[:200]!r}); "
            "check the engine setting and the server's structured-output support",
            exc,
        ) from exc
