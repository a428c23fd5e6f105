"""The world side of the loop: tool calls in, observations out; requests in, responses out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field


class ToolCall(BaseModel):
    """One tool call as the model proposed it.

    ``arguments`` is whatever JSON value the model produced: benchmarks such as τ-bench pass it on
    without schema validation, so the runtime must not coerce or reject it.
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


@runtime_checkable
class Environment(Protocol):
    """A sequential task episode seen from the agent.

    The loop asks for the first request, executes tool calls, and hands each final response back,
    receiving the next request. ``termination`` is set once the environment has ended the episode
    (for example the user said stop, or too many tool errors); the loop stops at that point.
    """

    @property
    def termination(self) -> str | None: ...

    async def first_request(self) -> str | None: ...

    async def execute(self, calls: Sequence[ToolCall]) -> list[ToolResult]: ...

    async def respond(self, message: str) -> str | None: ...
