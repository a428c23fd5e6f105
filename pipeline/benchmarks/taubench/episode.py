"""One τ-bench task as a FlowState :class:`~flowstate.environment.Environment` (TOOLS.md §6).

The episode owns the live database, the upstream-shaped transcript and upstream's step and error
accounting. Each user message is one FlowState request: the agent's tool calls and final text in
answer to it carry that request's number (the fixed greeting is request 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from flowstate.environment import ToolCall, ToolResult
from pipeline.benchmarks.base import BenchmarkEnvironment
from pipeline.benchmarks.taubench.data import DataDir
from pipeline.benchmarks.taubench.domains import fresh_db, toolkit_for
from pipeline.benchmarks.taubench.tasks import Task
from pipeline.benchmarks.taubench.user_simulator import UserSimulator, is_stop
from pipeline.benchmarks.transcript import TranscriptMessage, TranscriptToolCall

GREETING = "Hi! How can I help you today?"
DEFAULT_MAX_STEPS = 200  # upstream CLI default (its library default is 100)
DEFAULT_MAX_ERRORS = 10

Termination = Literal["user_stop", "agent_stop", "max_steps", "too_many_errors", "user_error", "agent_error"]


class EpisodeEndedError(RuntimeError):
    """The loop called the episode before it started or after it ended."""


class TauEpisode(BenchmarkEnvironment):
    """A half-duplex conversation between the agent, a simulated user and the domain tools.

    Steps are counted as upstream does: one per user message, per agent message and per batch of
    tool results. After every step whose next recipient is not the tools, the episode ends with
    ``max_steps`` once ``steps >= max_steps`` and with ``too_many_errors`` once the number of
    failed tool results reaches ``max_errors`` (that reason wins when both hold, and either one
    overrides a stop token sent in the same step, as upstream's check does).
    """

    def __init__(
        self,
        task: Task,
        user: UserSimulator,
        *,
        data_dir: DataDir = None,
        max_steps: int = DEFAULT_MAX_STEPS,
        max_errors: int = DEFAULT_MAX_ERRORS,
    ) -> None:
        self.task = task
        self.user = user
        self.max_steps = max_steps
        self.max_errors = max_errors
        self.db = fresh_db(task.domain, data_dir)
        self.tools = toolkit_for(self.db)
        self.transcript: list[TranscriptMessage] = [TranscriptMessage(role="assistant", content=GREETING, request=0)]
        self.steps = 0
        self.errors = 0
        self._termination: Termination | None = None
        self._request = 0
        self._calls = 0

    @property
    def termination(self) -> Termination | None:
        return self._termination

    async def first_request(self) -> str | None:
        if self._request or self._termination:
            raise EpisodeEndedError("first_request() may only be called once, at the start")
        return await self._user_turn()

    async def execute(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        """Run the calls of one agent message in order; each sees the previous one's effects."""
        self._require_running()
        if not calls:
            raise ValueError("execute() needs at least one tool call")
        recorded = [
            TranscriptToolCall(id=call.id or self._next_call_id(), name=call.name, arguments=call.arguments)
            for call in calls
        ]
        self.transcript.append(
            TranscriptMessage(role="assistant", tool_calls=recorded, request=self._request)
        )
        self.steps += 1  # the agent's message; its recipient is the environment: no limit check
        results = []
        for call, record in zip(calls, recorded, strict=True):
            result = self.tools.execute(call)
            self.errors += result.error
            self.transcript.append(
                TranscriptMessage(
                    role="tool",
                    content=result.content,
                    tool_call_id=record.id,
                    error=result.error,
                    request=self._request,
                )
            )
            results.append(result)
        self.steps += 1  # the environment's step
        self._check_limits()
        return results

    async def respond(self, message: str) -> str | None:
        """Deliver the agent's text to the user; the user's next request, or ``None`` at the end."""
        self._require_running()
        if not message.strip():
            self._termination = "agent_error"  # upstream rejects an empty agent message
            return None
        self.transcript.append(TranscriptMessage(role="assistant", content=message, request=self._request))
        self.steps += 1
        if self._check_limits():
            return None
        return await self._user_turn()

    async def _user_turn(self) -> str | None:
        text = await self.user.reply(list(self.transcript))
        if not text.strip():
            self._termination = "user_error"
            return None
        self._request += 1
        self.transcript.append(TranscriptMessage(role="user", content=text, request=self._request))
        self.steps += 1
        if is_stop(text):
            self._termination = "user_stop"
        self._check_limits()
        return None if self._termination else text

    def _check_limits(self) -> bool:
        if self.steps >= self.max_steps:
            self._termination = "max_steps"
        if self.errors >= self.max_errors:
            self._termination = "too_many_errors"
        return self._termination is not None

    def _require_running(self) -> None:
        if self._termination:
            raise EpisodeEndedError(f"the episode has ended ({self._termination})")
        if not self._request:
            raise EpisodeEndedError("call first_request() before anything else")

    def _next_call_id(self) -> str:
        self._calls += 1
        return f"call_{self._calls}"
