"""A task that is a fixed list of requests (a benchmark's subtasks), as an environment.

The loop runs the requests q_1..q_K in order: a final response ends a request and the next one
starts; so does the loop's step limit (that request then has no answer) and a tool that ends it
(:meth:`FixedRequests.end_current_request`, e.g. a purchase). After the last request the episode
ends with ``requests_done``. Every event goes to the transcript, which grading reads.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Awaitable, Callable, Sequence

from flowstate import RequestEnd, ToolCall, ToolResult
from pipeline.benchmarks.base import BenchmarkEnvironment
from pipeline.benchmarks.transcript import TranscriptMessage, TranscriptToolCall

REQUESTS_DONE = "requests_done"


class FixedRequests(BenchmarkEnvironment):
    """Subclasses run the tools (:meth:`run_tool`) and may say what memory methods store and query with."""

    def __init__(self, requests: Sequence[str]) -> None:
        if not requests:
            raise ValueError("a task needs at least one request")
        self.requests = list(requests)
        self.transcript: list[TranscriptMessage] = []
        self.current = 0  # the request in progress (1-based); 0 before the first
        self._termination: str | None = None
        self._request_done = False

    @property
    def termination(self) -> str | None:
        return self._termination

    @property
    def request_done(self) -> bool:
        return self._request_done

    @abstractmethod
    async def run_tool(self, call: ToolCall) -> ToolResult:
        """One tool call of the current request (``self.current``)."""

    def end_current_request(self) -> None:
        """Called by a tool whose effect ends the request (the loop then starts the next one)."""
        self._request_done = True

    async def first_request(self) -> str | None:
        return self._next()

    async def execute(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        return await self.record_calls(calls, self.run_tool)

    async def record_calls(self, calls: Sequence[ToolCall],
                           run: Callable[[ToolCall], Awaitable[ToolResult]]) -> list[ToolResult]:
        """Run the calls in order with ``run``, recording the agent's message and each result."""
        recorded = [TranscriptToolCall(id=c.id or f"call_{self.current}_{i}", name=c.name, arguments=c.arguments)
                    for i, c in enumerate(calls, 1)]
        self.transcript.append(TranscriptMessage(role="assistant", tool_calls=recorded, request=self.current))
        results = []
        for call, record in zip(calls, recorded, strict=True):
            result = await run(call)
            self.transcript.append(TranscriptMessage(role="tool", content=result.content, tool_call_id=record.id,
                                                     error=result.error, request=self.current))
            results.append(result)
        return results

    async def respond(self, message: str) -> str | None:
        self.transcript.append(TranscriptMessage(role="assistant", content=message, request=self.current))
        return self._next()

    async def end_request(self, ended: RequestEnd) -> str | None:
        """A request without a response (step limit, or a tool ended it): the next one starts."""
        return self._next()

    def _next(self) -> str | None:
        self._request_done = False
        if self.current >= len(self.requests):
            self._termination = REQUESTS_DONE
            return None
        self.current += 1
        query = self.requests[self.current - 1]
        self.transcript.append(TranscriptMessage(role="user", content=query, request=self.current))
        return query


def final_responses(transcript: Sequence[TranscriptMessage], requests: int) -> list[str | None]:
    """Each request's last assistant message without tool calls (None where a request had none):
    what a benchmark with a fixed list of requests grades."""
    answers: list[str | None] = [None] * requests
    for message in transcript:
        if message.role == "assistant" and not message.tool_calls and 1 <= message.request <= requests:
            answers[message.request - 1] = message.content
    return answers
