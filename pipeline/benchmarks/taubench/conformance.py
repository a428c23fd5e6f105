"""Pure helpers for conformance checks and prompts: run calls on a fresh DB, render the reference
agent's system prompt and tool lists (TOOLS.md §6.1)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from flowstate.environment import ToolCall
from pipeline.benchmarks.taubench.data import DataDir
from pipeline.benchmarks.taubench.database import copy_json
from pipeline.benchmarks.taubench.domains import fresh_db, get_task, policy, tool_schemas
from pipeline.benchmarks.taubench.grading import replay

AGENT_INSTRUCTION = (
    "You are a customer service agent that helps the user according to the <policy> provided below.\n"
    "In each turn you can either:\n- Send a message to the user.\n- Make a tool call.\n"
    "You cannot do both at the same time.\n\n"
    "Try to be helpful and always follow the policy. Always make sure you generate valid JSON only."
)


def agent_system_prompt(domain: str, data_dir: DataDir = None) -> str:
    """The reference agent's system prompt: fixed instruction plus the domain policy."""
    return f"<instructions>\n{AGENT_INSTRUCTION}\n</instructions>\n<policy>\n{policy(domain, data_dir)}\n</policy>"


def exec_calls(domain: str, calls: Sequence[ToolCall | Mapping[str, Any]], data_dir: DataDir = None) -> dict[str, Any]:
    """Execute ``calls`` (``{"name", "arguments"}``) in order on a fresh DB.

    Returns ``{"outputs": [{"content", "error"}…], "final_db_hash", "changed"}`` where
    ``changed`` holds the canonical records that differ from the initial DB.
    """
    db = fresh_db(domain, data_dir)
    parsed = [call if isinstance(call, ToolCall) else ToolCall.model_validate(call) for call in calls]
    outputs = [result.model_dump() for result in replay(db, parsed)]
    return {"outputs": outputs, "final_db_hash": db.canonical_hash(), "changed": db.changed_records()}


def replay_gold(domain: str, task_id: str, data_dir: DataDir = None) -> dict[str, Any]:
    """:func:`exec_calls` on the task's gold actions."""
    actions = get_task(domain, task_id, data_dir).evaluation_criteria.actions
    calls = [ToolCall(name=action.name, arguments=action.arguments) for action in actions]
    return exec_calls(domain, calls, data_dir)


def tool_list(domain: str, data_dir: DataDir = None) -> list[dict[str, Any]]:
    """The function schemas exactly as upstream gives them to the agent."""
    return copy_json(tool_schemas(domain, data_dir).tools)


def compact_tool_list(domain: str, data_dir: DataDir = None) -> str:
    """One line per tool, ``name(arg, …): first line of description``, for small-context models."""
    lines = []
    for schema in tool_schemas(domain, data_dir).tools:
        function = schema["function"]
        arguments = ", ".join(function["parameters"].get("properties", {}))
        summary = function["description"].strip().splitlines()[0]
        lines.append(f"{function['name']}({arguments}): {summary}")
    return "\n".join(lines)
