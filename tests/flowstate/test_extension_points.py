"""What methods and environments may decide beyond FlowState itself: rule-made nodes and what the index
lists, what ends a request, the memory entries and queries a benchmark supplies, method records and
the callers a method declares, and the registries that name them."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from flowstate import (
    METHODS,
    Capability,
    Environment,
    EpisodeResult,
    FlowStateRuntime,
    FullContextSession,
    LoopLimits,
    MethodOptions,
    MethodSession,
    Origin,
    Registry,
    RequestEnd,
    RequestOutcome,
    RequestStart,
    StateNode,
    StateType,
    TaskPrompt,
    ToolCall,
    ToolResult,
    UnknownPluginError,
    new_session,
    register_method,
    render_trajectory,
    run_episode,
)
from tests.flowstate.fixtures import EnvironmentFixture, ScriptedPolicyFixture, add, tagged

TASK = TaskPrompt(task_policy="policy", available_tools="t")


def rule_node(state_id: str, request: int, refs: Sequence[tuple[str, str]] = ()) -> StateNode:
    return StateNode(state_id=state_id, type=StateType.JUDGEMENT, summary=f"rule {state_id}", value="v",
                     refs=tuple({"rel": rel, "state_id": target} for rel, target in refs), source_request=request,
                     origin=Origin.RULE)


def test_rule_made_nodes_persist_with_the_observations_they_reference() -> None:
    runtime = FlowStateRuntime(index_origins=frozenset({Origin.RULE}))
    runtime.begin_request("q1")
    runtime.apply([add("model_made")], [])
    runtime.add_observation(1, "raw result", "raw")
    runtime.end_request([rule_node("request_1_response", 1, [("derives", "obs_1_1"), ("derives", "gone")])])
    repo = runtime.repository
    assert repo.get("obs_1_1").origin is Origin.TOOL  # kept because the rule node references it
    assert [r.state_id for r in repo.get("request_1_response").refs] == ["obs_1_1"]  # dangling ref dropped
    # the index lists what the method says: here the rule-made node, not the model-made one
    assert [s.state_id for s in runtime.index()[0].states] == ["request_1_response"]
    runtime.begin_request("q2")
    assert runtime.in_index("request_1_response") and not runtime.in_index("model_made")
    effects = runtime.apply([], ["request_1_response"])
    assert effects.disclosed == ["request_1_response"]


def test_rule_nodes_must_say_so_and_use_fresh_ids() -> None:
    runtime = FlowStateRuntime()
    runtime.begin_request("q")
    runtime.apply([add("a")], [])
    with pytest.raises(ValueError, match="origin 'rule'"):
        runtime.end_request([StateNode(state_id="x", type=StateType.JUDGEMENT, summary="", source_request=1)])
    with pytest.raises(ValueError, match="reuses an existing state id"):
        runtime.end_request([rule_node("a", 1)])
    with pytest.raises(ValueError, match="source_request 1"):
        runtime.end_request([rule_node("y", 2)])


class SubtaskEnvironment(EnvironmentFixture):
    """A fixed list of requests whose tool ``buy`` ends the request, and whose step limit starts the next."""

    def __init__(self, requests: Sequence[str]) -> None:
        super().__init__(requests, tools={"buy": "bought", "look": "seen"})
        self.ended: list[RequestEnd] = []
        self._done = False

    @property
    def request_done(self) -> bool:
        return self._done

    async def execute(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        self._done = any(c.name == "buy" for c in calls)
        return await super().execute(calls)

    async def end_request(self, ended: RequestEnd) -> str | None:
        self.ended.append(ended)
        self._done = False
        return self._next()

    def memory_query(self, query: str) -> str:
        return f"about {query}"

    def memory_entries(self, outcome: RequestOutcome) -> list[str]:
        return [f"{outcome.index}:{outcome.ended.value}:{outcome.final_response}"]


class MemoryProbeOptions(MethodOptions):
    name: Literal["memory_probe"] = "memory_probe"


class MemoryProbe(FullContextSession[MemoryProbeOptions]):
    """TEST FIXTURE: Full Context that also records the memory queries and entries it is given."""

    uses = frozenset({Capability.MEMORY})
    record_kinds = ("query", "entries")

    async def begin_request(self, request: RequestStart) -> None:
        await super().begin_request(request)
        self.record("query", request.memory_query)

    async def end_request(self, outcome: RequestOutcome) -> None:
        await super().end_request(outcome)
        self.record("entries", outcome.memory_entries)


register_method(MemoryProbeOptions, MemoryProbe)


def _run(env: Environment, script: list[str], method: str = "memory_probe",
         limit: int = 3) -> tuple[EpisodeResult, MethodSession[Any]]:
    session = new_session(method, TASK)
    return asyncio.run(run_episode(session, ScriptedPolicyFixture(script), env,
                                   limits=LoopLimits(max_steps_per_request=limit))), session


def test_what_ends_a_request_is_the_environments_choice() -> None:
    env = SubtaskEnvironment(["first", "second", "third"])
    script = [tagged(calls=[{"name": "buy", "arguments": {}}]),  # request 1: a purchase ends it
              tagged(calls=[{"name": "look", "arguments": {}}])] + [tagged(calls=[{"name": "look", "arguments": {}}])] * 2 \
        + [tagged(message="done")]  # request 2 runs into the step limit (3); request 3 answers
    result, session = _run(env, script)
    assert env.ended == [RequestEnd.ENVIRONMENT, RequestEnd.STEP_LIMIT]
    assert result.requests == 3 and result.termination == "user_stop" and env.responses == ["done"]
    assert [(s.request, s.step) for s in result.steps] == [(1, 1), (2, 1), (2, 2), (2, 3), (3, 1)]
    records = [(r.kind, r.request, r.payload) for r in result.records]
    assert records == [("query", 1, "about first"), ("entries", 1, ["1:environment:None"]),
                       ("query", 2, "about second"), ("entries", 2, ["2:step_limit:None"]),
                       ("query", 3, "about third"), ("entries", 3, ["3:response:done"])]


def test_by_default_the_step_limit_ends_the_episode_and_memory_entries_are_the_trajectory() -> None:
    env = EnvironmentFixture(["q1", "q2"], tools={"t": "raw"})
    result, session = _run(env, [tagged(calls=[{"name": "t", "arguments": {"a": 1}}]), tagged(message="m1")] +
                           [tagged(calls=[{"name": "t", "arguments": {}}])] * 3, limit=3)
    assert result.termination == "max_steps" and result.requests == 2
    first_entries = next(r.payload for r in result.records if r.kind == "entries")
    # the default entry is the request as Full Context renders it, observation after its step
    prompt = asyncio.run(session.messages(None))[1].content
    history = prompt.split("<trajectory_history>\n")[1].split("\n</trajectory_history>")[0]
    assert first_entries == ["\n".join(history.splitlines()[:5])]
    assert first_entries[0].splitlines()[0] == "user (request 1): q1" and "observation_id: obs_1_1\nraw" in first_entries[0]
    assert [r.payload for r in result.records if r.kind == "query"] == ["q1", "q2"]  # the default query: the request


def test_render_trajectory_matches_full_context() -> None:
    env = EnvironmentFixture(["q"], tools={"t": "raw"})
    result, session = _run(env, [tagged(calls=[{"name": "t", "arguments": {}}]), tagged(message="ok")], method="full_context")
    outcome = RequestOutcome(index=1, query="q", ended=RequestEnd.RESPONSE, final_response="ok", steps=result.steps)
    assert render_trajectory(outcome) == session.trajectory.text()  # what Full Context showed


def test_records_need_a_declared_kind() -> None:
    session = new_session("memory_probe", TASK)
    with pytest.raises(ValueError, match="declares no record kind 'other'"):
        session.record("other", {})


def test_a_method_is_given_the_callers_it_declared() -> None:
    class NeedsModelOptions(MethodOptions):
        name: Literal["needs_model"] = "needs_model"

    class NeedsModel(FullContextSession):
        uses = frozenset({Capability.MEMORY_MODEL})

    register_method(NeedsModelOptions, NeedsModel)
    try:
        with pytest.raises(ValueError, match="needs callers it was not given: memory_model"):
            new_session("needs_model", TASK)
    finally:
        METHODS._entries.pop("needs_model")  # noqa: SLF001 - keep the registry as the other tests see it
        METHODS._models.pop("needs_model")  # noqa: SLF001


def test_registries_name_what_they_know() -> None:
    with pytest.raises(UnknownPluginError, match=r"no method 'bm26' is registered \(known: .*flowstate.*full_context"):
        new_session("bm26", TASK)

    class Untagged(BaseModel):
        name: str

    with pytest.raises(TypeError, match="must declare name: Literal"):
        Registry("thing", "name").register("x", object(), Untagged)
