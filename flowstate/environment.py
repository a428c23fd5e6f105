"""The world side of the loop: tool calls in, observations out; requests in, responses out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from flowstate.records import RequestEnd, RequestOutcome
from flowstate.tools import ToolCall, ToolResult

__all__ = ["Environment", "RequestEnd", "ToolCall", "ToolResult"]


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
