"""What each method puts in front of the model (appendix B.3) and what it keeps."""

from __future__ import annotations

import json

from flowstate import (
    FlowStateSession,
    MethodCallers,
    ProtocolMode,
    estimate_tokens,
    parse_output,
)
from tests.flowstate.fixtures import Driver, add, tagged


def test_flowstate_system_prompt_has_rules_policy_tools_and_protocol():
    system = Driver("flowstate").messages()[0].content
    for part in ("<instructions>", "## flowstate_rules", "### Progressive State Access", "</instructions>",
                 "<policy>\nPOLICY-TEXT\n</policy>", "<tools>\nTOOLS-TEXT\n</tools>", "<state_focus>", "<output_protocol>"):
        assert part in system
    assert system.index("## flowstate_rules") < system.index("</instructions>") < system.index("<policy>")


def test_full_context_differs_only_by_method_parts():
    fs = Driver("flowstate").messages()[0].content
    fc = Driver("full_context").messages()[0].content
    assert "flowstate_rules" not in fc and "<state_delta>" not in fc and "<tool_calls>" in fc
    assert fs.split("## flowstate_rules")[0].rstrip("\n") == fc.split("</instructions>")[0].rstrip("\n")
    def middle(system: str) -> str:
        return system.split("</instructions>")[1].split("<output_protocol>")[0]

    assert middle(fs) == middle(fc)


def test_json_mode_switches_the_protocol_text_and_sets_a_schema():
    tagged_session = Driver("flowstate").session
    json_driver = Driver({"name": "flowstate", "protocol": ProtocolMode.JSON}, tool_names=["t"])
    assert tagged_session.json_schema is None
    assert json_driver.session.json_schema["properties"]["tool_calls"]["items"]["properties"]["name"]["enum"] == ["t"]
    assert "one JSON object" in json_driver.messages()[0].content


def test_flowstate_input_shows_index_active_state_observation_and_query():
    driver = Driver("flowstate")
    session = driver.session
    assert isinstance(session, FlowStateSession)
    driver.begin("first")
    driver.apply(parse_output(tagged(delta=[add("h1", "preference")])))
    driver.end()
    driver.begin("second question")
    driver.apply(parse_output(tagged(delta=[add("cur", refs=[("derives", "h1")])])))
    obs = driver.observe(1, '{"a": 1}', "raw")
    user = driver.messages(obs)[1].content
    index_block = user.split("Historical State Index:\n")[1].split("\nActive State:")[0]
    assert json.loads(index_block) == [{"user_query": "first", "query_id": 1,
                                        "states": [{"state_id": "h1", "summary": "summary of h1"}]}]
    active_block = user.split("Active State:\n")[1].split("\n</agent_status>")[0]
    assert json.loads(active_block) == [{"state_id": "cur", "type": "knowledge",
                                         "related_states": [{"state_id": "h1", "rel": "derives"}],
                                         "summary": "summary of cur", "value": {"id": "cur"}}]
    assert "<latest_observation>\nobservation_id: obs_2_1\n{\"a\": 1}\n</latest_observation>" in user
    assert user.endswith("<user_query>\nsecond question\n</user_query>")
    assert session.last_stats.active_nodes == 1 and session.last_stats.index_states == 1


def test_rejection_feedback_is_off_by_default_and_shown_when_enabled():
    for enabled in (False, True):
        driver = Driver({"name": "flowstate", "rejection_feedback": enabled})
        driver.begin("q")
        driver.apply(parse_output(tagged(focus=[{"target_id": "ghost", "reason": "r"}], delta=[add("obs_1_1")])))
        user = driver.messages()[1].content
        assert ("<rejected_operations>" in user) is enabled
        if enabled:
            block = user.split("<rejected_operations>\n")[1].split("\n</rejected_operations>")[0]
            assert [item["state_id"] for item in json.loads(block)] == ["obs_1_1", "ghost"]
        driver.apply(parse_output(tagged(message="ok")))
        assert "<rejected_operations>" not in driver.messages()[1].content


def test_full_context_history_is_append_only_and_shows_each_observation_once():
    driver = Driver("full_context")
    driver.begin("book it")
    prompts = [driver.messages()[1].content]
    driver.apply(parse_output(tagged(calls=[{"name": "search", "arguments": {"q": "x"}}])))
    obs = driver.observe(1, "RESULT-ONE", "raw")
    prompts.append(driver.messages(obs)[1].content)
    driver.apply(parse_output(tagged(message="Booked.")))
    driver.end()
    driver.begin("thanks, and cancel")
    prompts.append(driver.messages()[1].content)
    histories = [p.split("<trajectory_history>\n")[1].split("\n</trajectory_history>")[0] for p in prompts]
    assert all(later.startswith(earlier) for earlier, later in zip(histories, histories[1:], strict=False))
    assert prompts[1].count("RESULT-ONE") == 1 and "obs_1_1" in prompts[1].split("<latest_observation>")[1]
    assert "observation_id: obs_1_1\nRESULT-ONE" in histories[2]
    assert histories[2].splitlines()[0] == "user (request 1): book it"
    assert histories[2].splitlines()[-1] == "user (request 2): thanks, and cancel"
    assert '"content": "Booked."' in histories[2]


def _history(prompt: str) -> str:
    return prompt.split("<trajectory_history>\n")[1].split("\n</trajectory_history>")[0]


def _long_requests(driver: Driver, n: int, size: int = 400) -> list[str]:
    """``n`` requests, each one tool call with an observation of ``size`` characters; the prompts."""
    prompts = []
    for k in range(1, n + 1):
        driver.begin(f"request number {k}")
        prompts.append(driver.messages()[1].content)
        driver.apply(parse_output(tagged(calls=[{"name": "look", "arguments": {"k": k}}])))
        obs = driver.observe(1, f"RESULT-{k}:" + "x" * size, "raw")
        prompts.append(driver.messages(obs)[1].content)
        driver.apply(parse_output(tagged(message=f"done {k}")))
        driver.end()
    return prompts


def test_full_context_without_a_cap_keeps_everything_and_is_unchanged_in_identity():
    driver = Driver("full_context")
    prompts = _long_requests(driver, 6)
    assert "request number 1" in _history(prompts[-1]) and driver.session.records == []
    assert "history_tokens" not in driver.session.options.identity()  # unset options leave ids as they were


def test_full_context_with_a_cap_drops_the_oldest_history_first_and_records_it():
    driver = Driver({"name": "full_context", "history_tokens": 300})
    prompts = _long_requests(driver, 6)
    histories = [_history(p) for p in prompts]
    assert all(estimate_tokens(h) <= 300 + 8 for h in histories)  # entries are joined by newlines
    last = histories[-1]
    assert "RESULT-6" in prompts[-1] and "request number 6" in last and "request number 1" not in last
    kept = [k for k in range(1, 6) if f"RESULT-{k}:" in last]
    assert kept and kept == list(range(kept[0], 6))  # a contiguous, newest suffix of the observations
    records = driver.session.records
    assert records and {r.kind for r in records} == {"history_dropped"}
    totals = [r.payload["dropped_tokens_total"] for r in records]
    assert totals == sorted(totals) and all(r.payload["entries"] >= 1 for r in records)
    assert all(r.payload["history_tokens"] <= r.payload["budget_tokens"] == 300 for r in records)
    assert 1 < records[0].request < 6  # nothing is dropped while the history fits


def test_full_context_cap_gives_way_to_the_agents_context_window():
    window = 1200
    driver = Driver({"name": "full_context", "history_tokens": 120_000}, callers=MethodCallers(agent_prompt_tokens=window))
    prompts = _long_requests(driver, 12)
    system = estimate_tokens(driver.session.system_message.content)
    assert all(system + estimate_tokens(p) <= window + 8 for p in prompts)
    budgets = {r.payload["budget_tokens"] for r in driver.session.records}
    assert budgets and max(budgets) < window < 120_000
    assert "request number 12" in _history(prompts[-1])


def test_full_context_ignores_state_blocks_with_a_warning():
    driver = Driver("full_context")
    driver.begin("q")
    parsed = parse_output(tagged(delta=[add("a")], message="hi")).keep_state_blocks(driver.session.state_blocks())
    assert parsed.state_delta == [] and parsed.warnings == ["state blocks are not part of this method's protocol; ignored"]
    assert driver.apply(parsed).accepted_ops == []


def test_a_method_without_one_state_block_drops_only_that_block():
    parsed = parse_output(tagged(focus=["x"], delta=[add("a")], message="hi")).keep_state_blocks(("state_delta",))
    assert parsed.state_focus == [] and parsed.state_delta == [add("a")]
    assert parsed.warnings == ["state_focus is not part of this method's protocol; ignored"]


def test_observation_rendering_without_an_observation():
    driver = Driver("flowstate")
    driver.begin("q")
    assert "<latest_observation>\nNone\n</latest_observation>" in driver.messages()[1].content
