"""Text renderings the methods share: observations, JSON lists, state nodes and the trajectory.

The trajectory is Full Context's ``{full_trajectory}``: each user request, each model output's tool
calls and message, and each observation with its id, append-only. Memory methods store the same
rendering of a finished request by default.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from flowstate.records import RequestOutcome, StepRecord
from flowstate.repository import IndexEntry
from flowstate.runtime import Observation
from flowstate.state import StateNode, observation_id


def render_observation(observation: Observation | None) -> str:
    if observation is None:
        return "None"
    return f"observation_id: {observation.obs_id}\n{observation.content}"


def json_lines(items: list[Any]) -> str:
    """A JSON list with one item per line: compact, yet readable and deterministic."""
    if not items:
        return "[]"
    return "[\n" + ",\n".join(json.dumps(i, ensure_ascii=False) for i in items) + "\n]"


def index_entry_json(entry: IndexEntry) -> dict[str, Any]:
    return entry.model_dump(mode="json")


def active_node_json(node: StateNode) -> dict[str, Any]:
    return {
        "state_id": node.state_id,
        "type": node.type.value,
        "related_states": [{"state_id": r.state_id, "rel": r.rel.value} for r in node.refs],
        "summary": node.summary,
        "value": node.value,
    }


def request_line(request: int, query: str) -> str:
    return f"user (request {request}): {query}"


def output_line(request: int, step: int, tool_calls: Iterable[Any], message: str | None) -> str:
    """One model output as the trajectory shows it: its tool calls (name, arguments) and message."""
    output = {
        "tool_calls": [c.model_dump(mode="json", include={"name", "arguments"}) for c in tool_calls],
        "assistant_message": {"content": message},
    }
    return f"assistant (request {request}, step {step}): {json.dumps(output, ensure_ascii=False)}"


def trajectory_lines(request: int, query: str, steps: Iterable[StepRecord]) -> list[str]:
    """A request's trajectory from its step records (each observation right after its step)."""
    lines = [request_line(request, query)]
    for s in steps:
        lines.append(output_line(request, s.step, s.tool_calls, s.assistant_message))
        if s.observation is not None:
            obs = Observation(obs_id=s.observation_id or observation_id(request, s.step), content=s.observation,
                              summary=s.observation_summary or "")
            lines.append(render_observation(obs))
    return lines


def render_trajectory(outcome: RequestOutcome) -> str:
    """A finished request as Full Context renders it: the default memory entry."""
    return "\n".join(trajectory_lines(outcome.index, outcome.query, outcome.steps))
