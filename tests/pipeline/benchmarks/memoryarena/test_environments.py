"""Subtasks as requests: the formal reasoning tool and its limits, travel's step limit, what memory
methods are given, and that an episode never sees another task's data."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowstate import ChatMessage, Completion, Environment, EpisodeResult, LoopLimits, TaskPrompt, new_session, run_episode
from pipeline.benchmarks.memoryarena.environments import FormalEpisode, TravelEpisode
from pipeline.benchmarks.memoryarena.travel_tools import travel_db_at
from pipeline.core.plugins import load_plugins
from tests.flowstate.fixtures import ScriptedPolicyFixture, tagged
from tests.pipeline.benchmarks.memoryarena.conftest import TRAVEL_DB, example_tasks

TASK = TaskPrompt(task_policy="p", available_tools="t")
REASON = {"name": "reasoning", "arguments": {"input": "the problem"}}


@pytest.fixture(scope="module", autouse=True)
def memory_probe() -> None:
    """The method that shows what memory methods are given (a plug-in of the method's tests)."""
    load_plugins(["tests.flowstate.test_extension_points"])


class ToolModel:
    """TEST FIXTURE: the tool model, answering from a list (and recording what it was sent)."""

    def __init__(self, replies: Sequence[str]) -> None:
        self.replies, self.seen = list(replies), []

    async def complete(self, messages: Sequence[ChatMessage], *, json_schema: Any = None) -> Completion:
        self.seen.append(list(messages))
        return Completion(text=self.replies.pop(0) if self.replies else "worked")


def run(env: Environment, script: Sequence[str], method: str = "memory_probe", limit: int = 10) -> EpisodeResult:
    return asyncio.run(run_episode(new_session(method, TASK), ScriptedPolicyFixture(script), env,
                                   limits=LoopLimits(max_steps_per_request=limit)))


def test_the_reasoning_tool_calls_the_tool_model_with_upstreams_messages() -> None:
    task = example_tasks("formal_reasoning_math")[0]
    tool = ToolModel(["", "", "x = 1"])  # two empty replies, then one: up to three attempts
    env = FormalEpisode(task, tool)
    result = run(env, [tagged(calls=[REASON]), tagged(message="$f'(x)=3x^2-3$"), tagged(message="a2"), tagged(message="a3")])
    assert len(tool.seen) == 3 and [m.role for m in tool.seen[0]] == ["system", "user"]
    assert tool.seen[0][0].content == "You are a careful math solver."
    assert tool.seen[0][1].content == ("Solve the following math problem carefully.\nProvide concise reasoning, check your "
                                       "work, and state the final answer clearly.\n\nProblem: the problem\n")
    assert result.steps[0].observation == "x = 1" and result.termination == "requests_done" and result.requests == 3


def test_a_reasoning_tool_that_never_answers_ends_the_subtask_with_no_answer() -> None:
    task = example_tasks("formal_reasoning_math")[0]
    env = FormalEpisode(task, ToolModel(["", "", ""]))
    result = run(env, [tagged(calls=[{"name": "reasoning", "arguments": {}}]), tagged(message="a2"), tagged(message="a3")])
    assert [(s.request, s.step) for s in result.steps] == [(1, 1), (2, 1), (3, 1)]  # subtask 1 ended by the tool
    assert result.steps[0].observation == "Error executing reasoning: no reply after 3 attempts"
    assert [m.content for m in env.transcript if m.role == "assistant" and not m.tool_calls] == ["a2", "a3"]


def test_after_three_tool_rounds_the_agent_is_asked_for_its_final_answer() -> None:  # checklist 17
    task = example_tasks("formal_reasoning_math")[0]
    env = FormalEpisode(task, ToolModel([]))
    script = [tagged(calls=[REASON])] * 4 + [tagged(message="final"), tagged(message="a2"), tagged(message="a3")]
    result = run(env, script)
    request = "Use the prior reasoning tool results to produce the final answer now. Do not call any tools."
    assert result.steps[2].observation.endswith("\n\n" + request + " Include only the final solution needed for verification.")
    assert result.steps[3].observation.startswith(request) and result.steps[3].tool_errors == 1  # refused, not run
    assert result.steps[4].assistant_message == "final"


def test_formal_memory_entries_are_upstreams() -> None:
    task = example_tasks("formal_reasoning_math")[0]
    result = run(FormalEpisode(task, ToolModel(["worked"])), [tagged(calls=[REASON]), tagged(message=" 3x^2-3 "),
                                                               tagged(message="a2"), tagged(message="a3")])
    records = [(r.kind, r.request, r.payload) for r in result.records]
    first_entries = next(p for k, req, p in records if k == "entries" and req == 1)
    assert first_entries == [f"## Task: {task.questions[0]}\n## solution: 3x^2-3\n## Tool Calls Info: "
                             "[{'name': 'reasoning', 'input': 'the problem', 'output': 'worked'}]\n"]
    assert next(p for k, req, p in records if k == "entries" and req == 2) == [
        f"## Task: {task.questions[1]}\n## solution: a2\n"]


def test_travel_limits_tool_steps_and_stores_what_upstream_stores() -> None:  # checklist 17
    task = example_tasks("group_travel_planner")[3]  # 1004: two travellers
    env = TravelEpisode(task, travel_db_at(TRAVEL_DB), max_tool_steps=2)
    search = {"name": "RestaurantSearch", "arguments": {"city": "Stockton"}}
    result = run(env, [tagged(calls=[search]), tagged(calls=[search]), tagged(message="=== Chloe's Plan ===\nDay 1:")])
    assert [(s.request, s.step) for s in result.steps] == [(1, 1), (1, 2), (2, 1)]  # the limit ended Thomas's subtask
    assert result.termination == "requests_done"
    entries = [r.payload for r in result.records if r.kind == "entries"]
    thomas = json.loads(entries[0][0])
    assert (thomas["name"], thomas["final_plan"]) == ("Thomas", "")
    assert thomas["scratchpad"][0]["tool_calls"] == [{"id": "call_1_1_1", "name": "RestaurantSearch",
                                                      "args": {"city": "Stockton"}}]
    assert thomas["scratchpad"][0]["tool_results"][0]["result"].splitlines()[1].endswith("Stockton")
    chloe = json.loads(entries[1][0])
    assert chloe["scratchpad"] == [{"step_idx": 0, "thought": "=== Chloe's Plan ===\nDay 1:",
                                    "final_output": "=== Chloe's Plan ===\nDay 1:"}]
    base = json.loads(env.initial_memory()[0])
    assert base["is_base_person"] is True and base["name"] == task.base_person.name


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(example_tasks("group_travel_planner")), st.sampled_from(example_tasks("group_travel_planner")))
def test_an_episode_never_sees_another_tasks_data(mine, other) -> None:  # noqa: ANN001 - checklist 18
    if mine.id == other.id:
        return
    env = TravelEpisode(mine, travel_db_at(TRAVEL_DB))
    policy = ScriptedPolicyFixture([tagged(message="done")] * len(mine.questions))
    asyncio.run(run_episode(new_session("full_context", TASK), policy, env))
    seen = "\n".join(m.content for call in policy.calls for m in call) + json.dumps(env.initial_memory())
    foreign = set(other.questions) - set(mine.questions)
    assert foreign and not any(q in seen for q in foreign)
    assert other.base_person.query not in seen or other.base_person.query == mine.base_person.query
