"""Typed records of what happened at each step: enough to analyse, and to rebuild the state."""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict

from flowstate.chat import ChatMessage
from flowstate.repository import Repository
from flowstate.runtime import FlowStateRuntime, StepEffects
from flowstate.tools import ToolCall


class RequestEnd(str, Enum):
    """How a request ended."""

    RESPONSE = "response"  # the agent gave its final response
    ENVIRONMENT = "environment"  # the environment ended it after a tool call (a purchase, an action limit)
    STEP_LIMIT = "step_limit"  # the loop's per-request limit on model calls was reached
    EPISODE_END = "episode_end"  # the episode ended inside the request (a termination, a context overflow)


class StepRecord(StepEffects):
    """One model invocation (step ``step`` of request ``request``, both counted from 1): what
    ISU and PSA did (the inherited fields) and everything else about the step."""

    request: int
    step: int
    # The request's query text, on the first step of each request (None on later steps).
    query: str | None = None
    # ISU: what the model proposed, raw (the committed and excluded ops are inherited).
    proposed_ops: list[Any] = []
    # Execution decision and its result.
    tool_calls: list[ToolCall] = []
    tool_errors: int = 0
    observation_id: str | None = None
    observation: str | None = None
    observation_summary: str | None = None
    assistant_message: str | None = None
    # Protocol: errors make the output unusable in part or whole; warnings are repairs.
    parse_errors: list[str] = []
    protocol_warnings: list[str] = []
    # Model call.
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    cached_tokens_estimate: int | None = None
    tokens_counted: bool = False  # counted by a tokenizer, not reported by a server
    reusable_prefix_tokens: int | None = None
    physical_limit_tokens: int | None = None
    latency_s: float = 0.0
    finish_reason: str | None = None
    # Which model and server answered (for per-deployment latency and cache analysis).
    served_model: str | None = None
    served_by: str | None = None
    prompt_chars: int = 0
    # What the model saw.
    active_nodes: int = 0
    active_state_tokens: int = 0
    index_states: int = 0

    @property
    def observation_chars(self) -> int | None:
        return None if self.observation is None else len(self.observation)

    def as_json(self) -> dict[str, Any]:
        """The record as JSON values, in one shape for every reader (the step table, trace replay):
        ops and calls in full, rejections with their reason codes, the observation by id and size."""
        rejection = {"operation", "state_id", "reason", "detail"}
        data = self.model_dump(mode="json", exclude={"observation", "observation_summary", "accepted_ops",
                                                     "rejected_ops", "focus_rejected", "tool_calls"})
        return {
            **data,
            "accepted_ops": [op.model_dump(mode="json") for op in self.accepted_ops],
            "rejected_ops": [r.model_dump(mode="json", include=rejection) for r in self.rejected_ops],
            "focus_rejected": [r.model_dump(mode="json", include=rejection) for r in self.focus_rejected],
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in self.tool_calls],
            "observation_chars": self.observation_chars,
        }


class ModelExchange(BaseModel):
    """The full prompt and completion of one step (kept apart: the step table stays small)."""

    model_config = ConfigDict(extra="forbid")

    request: int
    step: int
    messages: list[ChatMessage]
    completion: str


class StepClock(BaseModel):
    """Where the episode is: request k and step t (both from 1; 0 before the first). The loop moves
    it; whoever records something during a step (a method record, a model call) reads it."""

    model_config = ConfigDict(extra="forbid")

    request: int = 0
    step: int = 0


class RequestStart(BaseModel):
    """The start of request q_k, as a method sees it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    index: int
    query: str
    # What a memory method retrieves with (the benchmark's choice; by default the query).
    memory_query: str
    # What a memory method stores before retrieving: the benchmark's initial memory, on the first request.
    memory_entries: list[str] = []


class RequestOutcome(BaseModel):
    """A finished request, as a method sees it at its end."""

    model_config = ConfigDict(extra="forbid")

    index: int
    query: str
    ended: RequestEnd
    # The request's final assistant message (None when it ended without one).
    final_response: str | None
    steps: list[StepRecord]
    # What a memory method stores (the benchmark's choice; by default the rendered trajectory).
    memory_entries: list[str] = []


class MethodRecord(BaseModel):
    """Something a method declares worth keeping (what it retrieved, what it wrote, a state before
    and after), at the request and step it happened (step 0: between steps)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    request: int
    step: int
    payload: Any


def rebuild_repository(steps: Iterable[StepRecord]) -> Repository:
    """Rebuild M from step records alone: the records are an event log of the state.

    Re-applies each step's accepted ops and accesses and its observation, in order. Rejected
    ops are not needed: they changed nothing.
    """
    runtime = FlowStateRuntime()
    for record in steps:
        if record.step == 1:
            if runtime.in_request:
                runtime.end_request()
            runtime.begin_request(record.query or "")
        runtime.apply([op.model_dump(mode="json") for op in record.accepted_ops], record.disclosed)
        if record.observation is not None:
            runtime.add_observation(record.step, record.observation, record.observation_summary or "")
    if runtime.in_request:
        runtime.end_request()
    return runtime.repository
