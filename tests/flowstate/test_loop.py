"""Algorithm 1 over a scripted policy and an in-memory environment (both test fixtures)."""

from __future__ import annotations

import asyncio

import pytest

from flowstate import ContextOverflowError, LoopLimits, TaskPrompt, new_session, run_episode
from flowstate.records import rebuild_repository
from tests.flowstate.fixtures import EnvironmentFixture, ScriptedPolicyFixture, add, tagged

TASK = TaskPrompt(task_policy="policy", available_tools="search, book")


def _run(method, script, env, **kw):
    policy = ScriptedPolicyFixture(script)
    result = asyncio.run(run_episode(new_session(method, TASK), policy, env, **kw))
    return result, policy


def test_a_two_request_flowstate_episode():
    env = EnvironmentFixture(["book hotel A", "what did it cost?"], tools={"search": "A costs 200", "book": "BK-1"})
    script = [
        tagged(delta=[add("pref", "preference")], calls=[{"name": "search", "arguments": {}}]),
        tagged(delta=[add("price", "attribute", refs=[("derives", "obs_1_1")])], calls=[{"name": "book", "arguments": {}}]),
        tagged(message="Booked BK-1."),
        tagged(focus=[{"target_id": "price", "reason": "the cost"}]),
        tagged(message="It cost 200."),
    ]
    result, policy = _run("flowstate", script, env)
    assert result.termination == "user_stop" and result.requests == 2
    assert [(s.request, s.step) for s in result.steps] == [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2)]
    assert env.responses == ["Booked BK-1.", "It cost 200."]
    assert [s.observation_id for s in result.steps] == ["obs_1_1", "obs_1_2", None, None, None]
    assert result.steps[3].disclosed == ["price"] and result.steps[3].disclosed_from == [1]
    # Disclosed at step 1 of request 2, visible from step 2 on, with its relations only.
    assert '"state_id": "price"' not in policy.calls[3][1].content.split("Active State:")[1]
    step2_active = policy.calls[4][1].content.split("Active State:")[1]
    assert '"state_id": "price"' in step2_active
    assert '"related_states": [{"state_id": "obs_1_1", "rel": "derives"}]' in step2_active
    assert "A costs 200" not in step2_active
    nodes = {n.state_id: n for n in result.repository.nodes}
    assert set(nodes) == {"pref", "price", "obs_1_1"} and nodes["obs_1_1"].value == "A costs 200"
    assert result.steps[0].query == "book hotel A" and result.steps[1].query is None
    assert len(result.exchanges) == 5 and result.exchanges[2].completion == script[2]


def test_tool_calls_and_a_message_in_one_output_run_the_tools_and_drop_the_message():
    env = EnvironmentFixture(["q"], tools={"search": "r"})
    result, _ = _run("full_context", [tagged(calls=[{"name": "search", "arguments": {}}], message="early"),
                                      tagged(message="done")], env)
    first = result.steps[0]
    assert first.assistant_message is None and any("dropped the message" in w for w in first.protocol_warnings)
    assert env.responses == ["done"] and [c.name for c in env.executed] == ["search"]


def test_several_calls_make_one_observation_listing_results_in_order():
    env = EnvironmentFixture(["q"], tools={"a": "ra", "b": "rb"})
    result, policy = _run("flowstate", [tagged(calls=[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}},
                                                      {"name": "zzz", "arguments": {}}]),
                                       tagged(message="ok")], env)
    step = result.steps[0]
    assert step.observation == '["ra", "rb", "Error: Tool \'zzz\' not found."]' and step.tool_errors == 1
    assert [c.id for c in env.executed] == ["call_1_1_1", "call_1_1_2", "call_1_1_3"]
    assert "observation_id: obs_1_1" in policy.calls[1][1].content


def test_unusable_outputs_are_recorded_steps_and_the_step_limit_ends_the_episode():
    env = EnvironmentFixture(["q"])
    result, _ = _run("flowstate", ["garbage", "", tagged(delta=[add("x")])], env, limits=LoopLimits(max_steps_per_request=3))
    assert result.termination == "max_steps" and len(result.steps) == 3
    assert result.steps[0].parse_errors == ["no protocol blocks found"]
    assert result.steps[1].parse_errors == ["empty output"]
    assert result.steps[2].parse_errors == []  # a state-only step is fine, but it counts
    assert [n.state_id for n in result.repository.nodes] == ["x"]  # the cut request is still persisted


def test_context_overflow_ends_the_episode_with_its_own_reason():
    class OverflowPolicy:
        async def complete(self, messages, *, json_schema=None):
            raise ContextOverflowError("prompt too long")

    result = asyncio.run(run_episode(new_session("flowstate", TASK), OverflowPolicy(), EnvironmentFixture(["q"])))
    assert result.termination == "context_overflow" and result.steps == []


def test_environment_termination_after_tool_errors_stops_the_loop():
    env = EnvironmentFixture(["q", "never asked"], max_errors=1)
    result, _ = _run("full_context", [tagged(calls=[{"name": "nope", "arguments": {}}])], env)
    assert result.termination == "too_many_errors" and len(result.steps) == 1


def test_step_records_carry_tokens_latency_and_state_sizes():
    env = EnvironmentFixture(["q"])
    result, _ = _run("flowstate", [tagged(delta=[add("a"), add("b")]), tagged(message="m")], env,
                     count_tokens=lambda text: len(text.split()))
    first, second = result.steps
    assert first.prompt_tokens and first.completion_tokens and first.latency_s == 0.001
    assert first.cached_tokens is None and first.prompt_chars > 0
    assert (first.active_nodes, second.active_nodes) == (0, 2)
    assert second.active_state_tokens > first.active_state_tokens


def test_json_protocol_schema_reaches_the_policy():
    session = new_session({"name": "full_context", "protocol": "json"}, TASK)
    policy = ScriptedPolicyFixture(['{"tool_calls": [], "assistant_message": {"content": "hi"}}'])
    result = asyncio.run(run_episode(session, policy, EnvironmentFixture(["q"])))
    assert policy.schemas[0]["required"] == ["tool_calls", "assistant_message"]
    assert result.steps[0].assistant_message == "hi"


def test_step_records_rebuild_the_repository():
    env = EnvironmentFixture(["q1", "q2"], tools={"t": "raw"})
    script = [tagged(delta=[add("a")], calls=[{"name": "t", "arguments": {}}]),
              tagged(delta=[add("b", refs=[("supports", "obs_1_1")]), {"operation": "update", "state_id": "a", "summary": "new"}],
                     message="m1"),
              tagged(focus=["b"], delta=[add("c", refs=[("follows", "a")])]),
              tagged(delta=[{"operation": "remove", "state_id": "c"}], message="m2")]
    result, _ = _run("flowstate", script, env)
    assert rebuild_repository(result.steps).export() == result.repository


def test_an_environment_that_never_starts_has_no_requests():
    env = EnvironmentFixture([])
    result, _ = _run("flowstate", [], env)
    assert result.termination == "user_stop" and result.requests == 0


@pytest.mark.parametrize("method", ["flowstate", "full_context"])
def test_infrastructure_errors_propagate(method):
    class DownPolicy:
        async def complete(self, messages, *, json_schema=None):
            raise ConnectionError("endpoint down")

    with pytest.raises(ConnectionError):
        asyncio.run(run_episode(new_session(method, TASK), DownPolicy(), EnvironmentFixture(["q"])))
