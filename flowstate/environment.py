"""The world side of the loop: tool calls in, observations out; requests in, responses out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from flowstate.records import RequestOutcome


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


class RequestEnd(str, Enum):
    """How a request ended."""

    RESPONSE = "response"  # the agent gave its final response
    ENVIRONMENT = "environment"  # the environment ended it after a tool call (a purchase, an action limit)
    STEP_LIMIT = "step_limit"  # the loop's per-request limit on model calls was reached
    EPISODE_END = "episode_end"  # the episode ended inside the request (a termination, a context overflow)


class Environment(ABC):
    """A sequential task episode seen from the agent.

    The loop asks for the first request, executes tool calls, and hands each final response back,
    receiving the next request. ``termination`` is set once the environment has ended the episode
    (for example the user said stop, or too many tool errors); the loop stops at that point.

    What ends a *request* is the environment's to decide as well: after tool calls it may set
    :attr:`request_done` (the loop then asks :meth:`end_request` for the next request), and when the
    loop's step limit cuts a request short, :meth:`end_request` says whether the episode goes on
    (the defaults: tools never end a request, and the step limit ends the episode).
    """

    @property
    @abstractmethod
    def termination(self) -> str | None: ...

    @abstractmethod
    async def first_request(self) -> str | None: ...

    @abstractmethod
    async def execute(self, calls: Sequence[ToolCall]) -> list[ToolResult]: ...

    @abstractmethod
    async def respond(self, message: str) -> str | None: ...

    @property
    def request_done(self) -> bool:
        """Whether the tool calls just executed ended the current request."""
        return False

    async def end_request(self, ended: RequestEnd) -> str | None:
        """The request ended without a final response (``ended``): the next request, or ``None``
        to end the episode (with :attr:`termination`, else the loop's own reason)."""
        return None

    # -- what memory-storing methods store and query with (benchmarks may define both) -----------
    def initial_memory(self) -> list[str]:
        """What a memory method stores before the first request (e.g. a case already solved); none by default."""
        return []

    def memory_query(self, query: str) -> str:
        """What a memory method retrieves with at the start of a request: by default its text."""
        return query

    def memory_entries(self, outcome: RequestOutcome) -> list[str] | None:
        """What a memory method stores at the end of a request; ``None``: the request's rendered
        trajectory (:func:`flowstate.methods.render_trajectory`)."""
        return None
