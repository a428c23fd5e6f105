"""FlowState's ``prompt_layout`` option: the paper's layout by default (ids, labels, bytes untouched),
``cache_friendly`` the same blocks and contents in another order, and where each departs from the
previous call (flowstate.prompt_blocks)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from flowstate import ChatMessage, Completion, FlowStateOptions, RequestEnd, StepRunner, ToolResult, Trace, new_session
from flowstate.methods.layout import ChangeOrder, PromptLayout, input_template, layout_sha256
from flowstate.prompt_blocks import departure
from flowstate.prompts import fill, slot_spans
from flowstate.protocol import parse_output
from tests.conftest import REPO_ROOT
from tests.flowstate.fixtures import TASK, Driver, add, tagged

CACHE = {"name": "flowstate", "prompt_layout": "cache_friendly"}


def test_the_default_is_the_papers_layout_and_leaves_ids_and_labels_alone():
    default, paper = FlowStateOptions(), FlowStateOptions(prompt_layout="paper")
    assert default.identity() == paper.identity() == {"name": "flowstate", "protocol": "tagged", "rejection_feedback": False}
    assert default.display == paper.display == "flowstate"
    option = FlowStateOptions(prompt_layout="cache_friendly", protocol="json")
    assert option.identity()["prompt_layout"] == "cache_friendly"
    assert option.display == "flowstate-json-cache_friendly"
    assert FlowStateOptions(prompt_layout="cache_friendly", label="mine").display == "mine"
    with pytest.raises(ValueError, match="prompt_layout"):
        FlowStateOptions(prompt_layout="fastest")


def test_the_cache_friendly_template_is_the_papers_with_the_index_and_the_query_first():
    paper, cache = input_template(PromptLayout.PAPER), input_template(PromptLayout.CACHE_FRIENDLY)
    assert cache.startswith("<agent_status>\nHistorical State Index:\n{historical_state_index}\n</agent_status>\n\n"
                            "<user_query>\n{query}\n</user_query>\n\n<agent_status>\nActive State:\n{active_state}\n")
    assert cache.endswith("<latest_observation>\n{observation}\n</latest_observation>")
    # the paper's lines, and the tags that make the index a block of its own
    assert Counter(paper.split("\n")) - Counter(cache.split("\n")) == Counter()
    assert Counter(cache.split("\n")) - Counter(paper.split("\n")) == Counter(["<agent_status>", "</agent_status>", ""])
    hashes = {layout: layout_sha256(layout) for layout in PromptLayout}
    assert len(set(hashes.values())) == 2 and all(len(h) == 64 for h in hashes.values())


def _replay_both(trace: Trace) -> list[tuple[list[ChatMessage], list[ChatMessage], str]]:
    """Every step's messages in both layouts (same outputs), and its completion."""
    async def run() -> list[tuple[list[ChatMessage], list[ChatMessage], str]]:
        runners = [StepRunner(new_session(method, TASK, ["search", "book"]))
                   for method in ({"name": "flowstate"}, CACHE)]
        steps = []
        for request in trace.requests:
            for runner in runners:
                await runner.begin_request(request.query)
            observations = [None, None]
            for step in request.steps:
                prompts = [await r.prompt(o) for r, o in zip(runners, observations, strict=True)]
                steps.append((prompts[0], prompts[1], step.completion))
                for i, runner in enumerate(runners):
                    record, parsed = await runner.record_output(prompts[i], Completion(text=step.completion))
                    observations[i] = None
                    if parsed.tool_calls and step.observation is not None:
                        observations[i] = await runner.record_observation(record, [ToolResult(content=step.observation)])
            for runner in runners:
                await runner.end_request(RequestEnd.RESPONSE, None)
        return steps

    return asyncio.run(run())


def _slots(layout: PromptLayout, user: str) -> dict[str, str]:
    return {name: user[start:end] for name, (start, end) in slot_spans(input_template(layout), user).items()}


@pytest.mark.parametrize("name", ["hotel", "messy-outputs"])
def test_cache_friendly_input_holds_the_same_information_at_every_step(name):
    trace = Trace.model_validate(json.loads((REPO_ROOT / "jobs" / "traces" / f"{name}.json").read_text()))
    steps = _replay_both(trace)
    assert len(steps) == sum(len(r.steps) for r in trace.requests)
    for paper, cache, _ in steps:
        assert paper[0] == cache[0]  # a layout changes the input only
        paper_slots = _slots(PromptLayout.PAPER, paper[1].content)
        cache_slots = _slots(PromptLayout.CACHE_FRIENDLY, cache[1].content)
        assert paper_slots.keys() == cache_slots.keys()
        for slot in paper_slots.keys() - {"active_state"}:
            assert paper_slots[slot] == cache_slots[slot], slot
        paper_states, cache_states = json.loads(paper_slots["active_state"]), json.loads(cache_slots["active_state"])
        key = lambda state: state["state_id"]  # noqa: E731
        assert sorted(paper_states, key=key) == sorted(cache_states, key=key)
        # in the paper's template and state order, the cache-friendly slots give the paper's bytes
        slots = {**cache_slots, "active_state": paper_slots["active_state"]}
        assert fill(input_template(PromptLayout.PAPER), slots) == paper[1].content


def test_the_hotel_trace_departs_later_in_the_cache_friendly_layout():
    trace = Trace.model_validate(json.loads((REPO_ROOT / "jobs" / "traces" / "hotel.json").read_text()))
    shared = {PromptLayout.PAPER: 0, PromptLayout.CACHE_FRIENDLY: 0}
    previous: dict[PromptLayout, list[ChatMessage]] = {}
    for paper, cache, completion in _replay_both(trace):
        for layout, messages in ((PromptLayout.PAPER, paper), (PromptLayout.CACHE_FRIENDLY, cache)):
            if layout in previous:
                before = previous[layout]
                where = departure(before, messages, input_template(layout))
                shared[layout] += len(messages[0].content) + (where.offset if where else len(messages[1].content))
            previous[layout] = [*messages, ChatMessage(role="assistant", content=completion)]
    assert shared[PromptLayout.CACHE_FRIENDLY] > shared[PromptLayout.PAPER]


def _step(driver: Driver, previous: list[ChatMessage], output: str, step: int, result: str):
    """Apply one output with a tool call, observe ``result``: the new messages and where they depart."""
    driver.apply(parse_output(output))
    messages = driver.messages(driver.observe(step, result, "raw"))
    before = [*previous, ChatMessage(role="assistant", content=output)]
    return messages, departure(before, messages, driver.session.input_template_text())


def test_where_each_layout_departs_within_a_request():
    call = [{"name": "search", "arguments": {}}]
    found, unreused = {}, {}
    for layout in PromptLayout:
        driver = Driver({"name": "flowstate", "prompt_layout": layout.value})
        driver.begin("first")
        driver.apply(parse_output(tagged(delta=[add("past")])))
        driver.end()
        driver.begin("second")
        messages, departures = driver.messages(), []
        outputs = [tagged(delta=[add("x"), add("y")], calls=call),
                   tagged(focus=[{"target_id": "past", "reason": "r"}], calls=call),
                   tagged(delta=[{"operation": "update", "state_id": "x", "value": {"v": 2}}], calls=call),
                   tagged(delta=[{"operation": "update", "state_id": "x", "value": {"v": 3}}], calls=call),
                   tagged(calls=call)]
        for step, output in enumerate(outputs, 1):
            messages, where = _step(driver, messages, output, step, f"R{step}")
            departures.append((where, len(messages[1].content)))
        found[layout] = [(w.block, w.change) for w, _ in departures]
        unreused[layout] = [length - w.offset for w, length in departures]
        user = messages[1].content
        assert user.count("second") == 1 and user.count("R5") == 1 and "R4" not in user
    assert found[PromptLayout.PAPER] == [
        ("active_state", "appended"),
        ("active_state", "inserted"),  # a disclosed state is listed before the request's own
        ("active_state", "changed"), ("active_state", "changed"),  # x in place, twice
        ("observation", "replaced"),  # and the query after it is computed again
    ]
    assert found[PromptLayout.CACHE_FRIENDLY] == [
        ("active_state", "appended"),
        ("active_state", "appended"),  # disclosed after the states already shown
        ("active_state", "changed"),  # x leaves its place for the end ...
        ("active_state", "changed"),  # ... where its next edit leaves y and past before it
        ("observation", "replaced"),  # the last block: everything before it is reused
    ]
    # Characters after the departure: fewer in the cache-friendly layout but at the first edit of x,
    # which it lists first (the paper's layout has the disclosed state ahead of it).
    cache, paper = unreused[PromptLayout.CACHE_FRIENDLY], unreused[PromptLayout.PAPER]
    assert [c < p for c, p in zip(cache, paper, strict=True)] == [True, True, False, True, True]
    assert sum(cache) < sum(paper)


def test_change_order_keeps_unchanged_items_in_place_and_moves_the_rest_to_the_end():
    order = ChangeOrder()
    a, b, c = ({"state_id": s, "v": 1} for s in "abc")
    assert order.arrange([a, b, c]) == [a, b, c]
    b2 = {**b, "v": 2}
    assert order.arrange([a, b2, c]) == [a, c, b2]
    assert order.arrange([{"state_id": "d"}, a, b2, c]) == [a, c, b2, {"state_id": "d"}]
    assert order.arrange([a, b2]) == [a, b2]
    with pytest.raises(ValueError, match="same state_id"):
        order.arrange([a, a])


_IDS = st.sampled_from(["a", "b", "c"])
_OPS = st.lists(st.one_of(
    _IDS.map(add),
    st.tuples(_IDS, st.integers(0, 2)).map(lambda p: {"operation": "update", "state_id": p[0], "value": {"v": p[1]}}),
    _IDS.map(lambda i: {"operation": "remove", "state_id": i}),
), max_size=3)


def _shown_states(driver: Driver, layout: PromptLayout) -> list[str]:
    """The Active State's states, in the order that matters to the layout (none for cache_friendly)."""
    states = [repr(node) for node in driver.session.runtime.active_nodes()]
    return states if layout is PromptLayout.PAPER else sorted(states)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_OPS, min_size=1, max_size=5))
@example([[add("a"), add("b")], [{"operation": "remove", "state_id": "a"}, add("a")]])  # the same states, reordered
def test_a_prompt_departs_before_the_observation_only_where_the_state_changed(deltas):
    """The paper's rendering departs before the observation only where the Active State's states or
    their order changed; the cache-friendly one only where its states changed, and then only by
    appending to, editing or shortening what it showed."""
    call = [{"name": "search", "arguments": {}}]
    for layout in PromptLayout:
        driver = Driver({"name": "flowstate", "prompt_layout": layout.value})
        driver.begin("q")
        messages = driver.messages()
        for step, delta in enumerate(deltas, 1):
            before = _shown_states(driver, layout)
            messages, where = _step(driver, messages, tagged(delta=delta, calls=call), step, f"R{step}")
            if _shown_states(driver, layout) == before:
                assert where.block == "observation"
            elif layout is PromptLayout.CACHE_FRIENDLY:
                assert (where.block, where.change) in {("active_state", c) for c in ("appended", "changed", "removed")}
