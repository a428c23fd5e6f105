"""Trace replay: the FlowState runtime over recorded model outputs, with no model and no environment.

A trace lists requests, each with the completions the model produced and what the environment
returned for each step's tool calls. Replaying it shows exactly what the rules accept, reject and
disclose, and the repository that results.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from flowstate.chat import Completion
from flowstate.errors import FlowStateError
from flowstate.loop import StepRunner
from flowstate.methods import FlowStateOptions, FlowStateSession
from flowstate.prompts import TaskPrompt
from flowstate.protocol import ProtocolMode
from flowstate.records import RequestEnd, StepRecord
from flowstate.runtime import Observation
from flowstate.tools import ToolResult


class TraceStep(BaseModel):
    model_config = ConfigDict(extra="forbid")

    completion: str
    # What the environment returned for this step's tool calls (null if it called none).
    observation: str | None = None


class TraceRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str
    steps: list[TraceStep] = Field(min_length=1)


class Trace(BaseModel):
    model_config = ConfigDict(extra="forbid")

    requests: list[TraceRequest]
    protocol: ProtocolMode = ProtocolMode.TAGGED


class TraceError(FlowStateError, ValueError):
    """A trace that contradicts itself (e.g. tool calls without an observation)."""


def replay_trace(trace: Trace | dict[str, Any]) -> dict[str, Any]:
    """Replay a trace; returns ``{"steps", "repository", "index"}`` (requests and steps from 1)."""
    trace = trace if isinstance(trace, Trace) else Trace.model_validate(trace)
    return asyncio.run(_replay(trace))


async def _replay(trace: Trace) -> dict[str, Any]:
    session = FlowStateSession(TaskPrompt(task_policy="", available_tools=""), FlowStateOptions(protocol=trace.protocol))
    runner = StepRunner(session)
    for k, request in enumerate(trace.requests, 1):
        await runner.begin_request(request.query)
        observation: Observation | None = None
        for t, step in enumerate(request.steps, 1):
            messages = await runner.prompt(observation)
            record, parsed = await runner.record_output(messages, Completion(text=step.completion))
            observation = None
            if parsed.tool_calls and step.observation is None:
                raise TraceError(f"request {k} step {t}: the completion calls tools but the observation is null")
            if not parsed.tool_calls and step.observation is not None:
                raise TraceError(f"request {k} step {t}: an observation is given but the completion calls no tool")
            if step.observation is not None:
                observation = await runner.record_observation(record, [ToolResult(content=step.observation)])
        last = runner.steps[-1]
        await runner.end_request(RequestEnd.RESPONSE if last.assistant_message is not None else RequestEnd.STEP_LIMIT,
                                 last.assistant_message)
    repository = session.runtime.repository
    return {
        "steps": [_step_json(s) for s in runner.steps],
        "repository": repository.export().model_dump(mode="json"),
        "index": [entry.model_dump(mode="json") for entry in repository.index()],
    }


# What a replay shows of each step: what ISU, PSA and the protocol made of it (no model-call figures).
REPLAY_FIELDS = ("request", "step", "accepted_ops", "rejected_ops", "focus_requested", "focus_accepted",
                 "focus_rejected", "disclosed", "disclosed_from", "tool_calls", "observation_id", "assistant_message",
                 "parse_errors", "protocol_warnings")


def _step_json(record: StepRecord) -> dict[str, Any]:
    """The fields, with the documented ``parse_error`` (the step's parse errors as one text, or null)
    before the list they come from."""
    data = record.as_json()
    step: dict[str, Any] = {}
    for name in REPLAY_FIELDS:
        if name == "parse_errors":
            step["parse_error"] = "; ".join(record.parse_errors) or None
        step[name] = data[name]
    return step
