"""MemoryArena tasks as environments: each subtask is one request, in order (CONTRACT §2).

Formal reasoning (§3.2): one tool, ``reasoning``, that calls the tool model; at most three tool rounds
per subtask, after which the agent is asked for its final answer. Group travel (§4.2–4.3): the six
TravelPlanner tools over the database; at most 30 tool-using steps per traveller, after which the
traveller's output is empty. A subtask cut short gives an empty answer and the next one starts.
Memory methods get what upstream stores: the formal entries of §3.5, the travel entries of §4.1–4.2.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flowstate import ChatMessage, Policy, RequestOutcome, ToolCall, ToolResult
from pipeline.benchmarks.memoryarena.data import FormalTask, TravelTask, prompts
from pipeline.benchmarks.memoryarena.subtasks import (
    FORMAL_FIRST_MEMORY,
    base_memory_entry,
    fill,
    formal_memory_entry,
    formal_prompts,
    travel_prompts,
    traveller_memory_entry,
)
from pipeline.benchmarks.memoryarena.travel_tools import TravelDB, TravelTools
from pipeline.benchmarks.requests import FixedRequests

REASONING_ATTEMPTS = 3


class FormalEpisode(FixedRequests):
    """A formal-reasoning task: subtask k is q_k; the agent answers with its final message."""

    def __init__(self, task: FormalTask, tool_model: Policy | None, *, max_tool_rounds: int = 3) -> None:
        super().__init__(formal_prompts(task))
        self.task = task
        self.tool_model = tool_model
        self.max_tool_rounds = max_tool_rounds
        self._rounds = 0
        self._traces: dict[int, list[dict[str, Any]]] = {}  # request -> its reasoning calls

    def _next(self) -> str | None:
        self._rounds = 0
        return super()._next()

    async def execute(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        p = prompts()["formal_reasoning"]
        if self._rounds >= self.max_tool_rounds:  # upstream's last call has no tools
            refusal = ToolResult(content=p["final_answer_request"], error=True)
            return await self.record_calls(calls, lambda call: _constant(refusal))
        self._rounds += 1
        results = await super().execute(calls)
        if self._rounds == self.max_tool_rounds and not self.request_done:
            # upstream then sends this as a user message and calls the model without tools
            last = results[-1]
            results[-1] = last.model_copy(update={"content": f"{last.content}\n\n{p['final_answer_request']}"})
            self.transcript[-1] = self.transcript[-1].model_copy(update={"content": results[-1].content})
        return results

    async def run_tool(self, call: ToolCall) -> ToolResult:
        if call.name != "reasoning":
            return ToolResult(content=f"Error: Unknown tool '{call.name}'", error=True)
        if self.tool_model is None:
            raise RuntimeError("the formal-reasoning tool needs a tool model")
        given = call.arguments.get("input") if isinstance(call.arguments, dict) else None
        problem = given if isinstance(given, str) and given else self.requests[self.current - 1]  # upstream: the prompt
        p = prompts()["formal_reasoning"]
        messages = [ChatMessage(role="system", content=p["reasoning_tool_system"]),
                    ChatMessage(role="user", content=fill(p["reasoning_tool_user_template"], {"task": problem}))]
        text = ""
        for _ in range(REASONING_ATTEMPTS):
            text = (await self.tool_model.complete(messages)).text
            if text.strip():
                break
        if not text.strip():  # upstream: the subtask's answer is then empty
            self.end_current_request()
            return ToolResult(content="Error executing reasoning: no reply after 3 attempts", error=True)
        self._traces.setdefault(self.current, []).append({"name": "reasoning", "input": problem, "output": text})
        return ToolResult(content=text)

    def initial_memory(self) -> list[str]:
        return [FORMAL_FIRST_MEMORY]

    def memory_entries(self, outcome: RequestOutcome) -> list[str]:
        answer = (outcome.final_response or "").strip()
        return [formal_memory_entry(self.task.questions[outcome.index - 1], answer, self._traces.get(outcome.index, []))]


async def _constant(result: ToolResult) -> ToolResult:
    return result


class TravelEpisode(FixedRequests):
    """A group trip: subtask k plans for added traveller k; the conversation starts afresh for each."""

    def __init__(self, task: TravelTask, db: TravelDB, *, max_tool_steps: int = 30) -> None:
        self.travellers = travel_prompts(task)
        super().__init__([message for _, message in self.travellers])
        self.task = task
        self.tools = TravelTools(db)
        self.max_tool_steps = max_tool_steps
        self._tool_steps = 0

    def _next(self) -> str | None:
        self._tool_steps = 0
        return super()._next()

    async def execute(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        results = await super().execute(calls)
        self._tool_steps += 1
        if self._tool_steps >= self.max_tool_steps:  # upstream: the traveller's output is then empty
            self.end_current_request()
        return results

    async def run_tool(self, call: ToolCall) -> ToolResult:
        text = self.tools.execute(call.name, call.arguments)
        return ToolResult(content=text, error=text.startswith("Error"))

    def initial_memory(self) -> list[str]:
        return [base_memory_entry(self.task)]

    def memory_entries(self, outcome: RequestOutcome) -> list[str]:
        name, _ = self.travellers[outcome.index - 1]
        return [traveller_memory_entry(name, self.task.questions[outcome.index - 1], self._scratchpad(outcome.index),
                                       outcome.final_response or "")]

    def _scratchpad(self, request: int) -> list[dict[str, Any]]:
        """One object per agent turn of the request, as upstream records it (§4.2)."""
        turns: list[dict[str, Any]] = []
        messages = [m for m in self.transcript if m.request == request and m.role != "user"]
        for m in messages:
            if m.role == "tool":
                call = next(c for t in reversed(turns) for c in t.get("tool_calls", []) if c["id"] == m.tool_call_id)
                turns[-1]["tool_results"].append({"tool_call_id": m.tool_call_id, "name": call["name"], "result": m.content})
                continue
            turn: dict[str, Any] = {"step_idx": len(turns), "thought": None if m.tool_calls else m.content,
                                    "final_output": None if m.tool_calls else m.content}
            if m.tool_calls:
                turn["tool_calls"] = [{"id": c.id, "name": c.name, "args": c.arguments} for c in m.tool_calls]
                turn["tool_results"] = []
            turns.append(turn)
        return turns
