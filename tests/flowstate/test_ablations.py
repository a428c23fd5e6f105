"""The ablations of Table 3: what each leaves out of the prompt and the protocol, and what it does instead."""

from __future__ import annotations

import json

import pytest

from flowstate import METHODS, ProtocolMode, method_options, new_session, parse_output
from flowstate.methods.flowstate_ablations import NO_RESPONSE, RESPONSE_SUMMARY_CHARS
from flowstate.rules import Reason
from tests.flowstate.fixtures import TASK, Driver, add, tagged

ISU_HEADING, PSA_HEADING = "### Incremental State Update", "### Progressive State Access"


def _active(prompt: str) -> list[dict]:
    return json.loads(prompt.split("Active State:\n")[1].split("\n</agent_status>")[0])


@pytest.mark.parametrize(("method", "kept", "gone", "heading_kept", "heading_gone"), [
    ("flowstate_no_psa", "state_delta", "state_focus", ISU_HEADING, PSA_HEADING),
    ("flowstate_no_isu", "state_focus", "state_delta", PSA_HEADING, ISU_HEADING),
])
@pytest.mark.parametrize("protocol", ["tagged", "json"])
def test_each_ablation_drops_one_half_from_rules_protocol_and_schema(method, kept, gone, heading_kept, heading_gone,
                                                                     protocol):
    session = new_session({"name": method, "protocol": protocol}, TASK, ["search"])
    system = session.system_message.content
    flowstate = new_session({"name": "flowstate", "protocol": protocol}, TASK, ["search"]).system_message.content
    assert session.state_blocks() == (kept,)
    assert heading_kept in system and heading_gone not in system and heading_gone in flowstate
    protocol_text = system.split("<output_protocol>")[1]
    assert kept in protocol_text and gone not in protocol_text and " four " not in protocol_text
    assert " three " in protocol_text
    if protocol == "json":
        assert set(session.json_schema["properties"]) == {kept, "tool_calls", "assistant_message"}
    # the task, the tools and the rest of the rules are FlowState's
    assert system.split("## flowstate_rules")[0] == flowstate.split("## flowstate_rules")[0]
    assert system.split("</instructions>")[1] .split("<output_protocol>")[0] == \
        flowstate.split("</instructions>")[1].split("<output_protocol>")[0]


def test_the_ablations_are_registered_methods_with_their_capabilities():
    assert {"flowstate_no_psa", "flowstate_no_isu"} <= set(METHODS.names())
    for name, kept in (("flowstate_no_psa", "state_delta"), ("flowstate_no_isu", "state_focus")):
        assert [c.value for c in METHODS.get(name).uses(method_options(name))] == [kept]


def _first_request(driver: Driver) -> None:
    """Request 1: a tool call, then two states (one citing the observation) and a reply."""
    driver.begin("find the flight")
    driver.messages()
    driver.apply(parse_output(tagged(calls=[{"name": "search", "arguments": {"q": "x"}}])))
    obs = driver.observe(1, "FLIGHT-RAW-RESULT", "raw")
    driver.messages(obs)
    driver.apply(parse_output(tagged(delta=[add("flight", "knowledge", refs=[("supports", "obs_1_1")]),
                                            add("plan", "judgement", refs=[("derives", "flight")])],
                                     message="Found it.")))
    driver.end("Found it.")


def test_without_psa_the_history_is_in_the_active_state_from_the_start_and_read_only():
    driver = Driver({"name": "flowstate_no_psa"})
    _first_request(driver)
    driver.begin("book it")
    user = driver.messages()[1].content
    assert "Historical State Index" not in user
    active = _active(user)
    assert [n["state_id"] for n in active] == ["flight", "plan"]  # model-made only: no persisted observation
    assert active[1]["value"] == {"id": "plan"} and active[1]["related_states"] == [{"state_id": "flight", "rel": "derives"}]
    assert "FLIGHT-RAW-RESULT" not in user
    # B.4 still holds: a historical state cannot be edited, a new one may cite it and its evidence
    effects = driver.apply(parse_output(tagged(delta=[{"operation": "update", "state_id": "plan", "summary": "s"},
                                                      add("booking", refs=[("follows", "plan"), ("supports", "obs_1_1")])],
                                               message="ok")))
    assert [r.reason for r in effects.rejected_ops] == [Reason.NOT_CURRENT_REQUEST]
    assert [op.state_id for op in effects.accepted_ops] == ["booking"]
    driver.end("ok")
    driver.begin("thanks")
    assert [n["state_id"] for n in _active(driver.messages()[1].content)] == ["flight", "plan", "booking"]


def test_without_psa_state_focus_is_ignored_with_a_warning():
    driver = Driver({"name": "flowstate_no_psa"})
    driver.begin("q")
    parsed = parse_output(tagged(focus=[{"target_id": "x", "reason": "r"}], message="hi"))
    parsed = parsed.keep_state_blocks(driver.session.state_blocks())
    assert parsed.state_focus == [] and parsed.warnings == ["state_focus is not part of this method's protocol; ignored"]


def test_without_isu_the_request_trajectory_is_shown_and_a_response_node_persists():
    driver = Driver({"name": "flowstate_no_isu"})
    driver.begin("find the flight")
    driver.messages()
    driver.apply(parse_output(tagged(calls=[{"name": "search", "arguments": {"q": "x"}}])))
    obs = driver.observe(1, "FLIGHT-RAW-RESULT", "raw")
    user = driver.messages(obs)[1].content
    history = user.split("<trajectory_history>\n")[1].split("\n</trajectory_history>")[0]
    assert history.splitlines()[0] == "user (request 1): find the flight" and '"name": "search"' in history
    assert "FLIGHT-RAW-RESULT" in user.split("<latest_observation>")[1]  # shown once, as the latest observation
    long_reply = "Your flight is HAT001. " * 20
    driver.apply(parse_output(tagged(message=long_reply)))
    driver.end(long_reply)

    driver.begin("book it")
    user = driver.messages()[1].content
    history = user.split("<trajectory_history>\n")[1].split("\n</trajectory_history>")[0]
    assert history == "user (request 2): book it"  # only the current request's trajectory
    [entry] = json.loads(user.split("Historical State Index:\n")[1].split("\nActive State:")[0])
    assert entry["states"] == [{"state_id": "request_1_response", "summary": long_reply[:RESPONSE_SUMMARY_CHARS]}]
    # PSA reaches the response node, then the observation it derives from
    driver.apply(parse_output(tagged(focus=[{"target_id": "request_1_response", "reason": "the flight id"}])))
    [node] = _active(driver.messages()[1].content)
    assert node["value"] == long_reply and node["type"] == "judgement"
    assert node["related_states"] == [{"state_id": "obs_1_1", "rel": "derives"}]
    driver.apply(parse_output(tagged(focus=[{"target_id": "obs_1_1", "reason": "the raw result"}])))
    assert [n["value"] for n in _active(driver.messages()[1].content)][1] == "FLIGHT-RAW-RESULT"


def test_without_isu_a_request_without_a_response_is_recorded_as_such_and_deltas_are_ignored():
    driver = Driver({"name": "flowstate_no_isu", "protocol": "json"})
    driver.begin("q")
    parsed = parse_output(json.dumps({"state_delta": [add("a")], "tool_calls": [], "assistant_message": {"content": None}}),
                          ProtocolMode.JSON).keep_state_blocks(driver.session.state_blocks())
    assert parsed.state_delta == [] and driver.apply(parsed).accepted_ops == []
    driver.end(None)
    node = driver.session.runtime.repository.get("request_1_response")
    assert (node.summary, node.value, node.refs, node.origin.value) == (NO_RESPONSE, None, (), "rule")
