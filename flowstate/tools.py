"""Tool calls as the model proposes them and what executing them returns: the plain types the
parser, the records and the environment share."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ToolCall(BaseModel):
    """One tool call as the model proposed it.

    ``arguments`` is the JSON object the model produced, not validated against the tool's schema
    (benchmarks such as τ-bench pass it on as it is). The parser guarantees an object: a call whose
    arguments are anything else is a protocol error of that call and never reaches a tool.
    """

    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: Any = Field(default_factory=dict)
    # Assigned by the runtime (``call_{k}_{t}_{i}``); models never provide it.
    id: str | None = None


class ToolResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: str
    error: bool = False
