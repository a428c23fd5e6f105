"""Invariants of the method under arbitrary model behaviour (hypothesis)."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowstate import (
    FlowStateRuntime,
    MethodCallers,
    ProtocolMode,
    Repository,
    TaskPrompt,
    new_session,
    parse_output,
    run_episode,
)
from flowstate.records import rebuild_repository
from pipeline.run.scripted_policies import UnchangedStatePolicy
from tests.flowstate.fixtures import BagOfWordsEmbedderFixture, EnvironmentFixture, ScriptedPolicyFixture, tagged

IDS = st.sampled_from(["a", "b", "c", "d", "obs_1_1", "obs_1_2", "obs_2_1", "obs_3_1", "x_1"])
TYPES = st.sampled_from(["preference", "knowledge", "attributes", "judgement", "artifacts", "bogus"])
RELS = st.sampled_from(["supports", "derives", "follows", "supersedes", "bogus"])
JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                           max_leaves=6)
REFS = st.lists(st.fixed_dictionaries({"rel": RELS, "state_id": IDS}), max_size=3)
OPS = st.one_of(
    st.fixed_dictionaries({"operation": st.just("add"), "state_id": IDS, "state_set": TYPES,
                           "summary": st.text(max_size=8), "value": JSON_VALUES, "refs": REFS}),
    st.fixed_dictionaries({"operation": st.just("update"), "state_id": IDS},
                          optional={"summary": st.text(max_size=8), "value": JSON_VALUES, "refs": REFS, "state_set": TYPES}),
    st.fixed_dictionaries({"operation": st.just("remove"), "state_id": IDS}),
    JSON_VALUES,
)
FOCUS = st.lists(st.one_of(IDS, st.fixed_dictionaries({"target_id": IDS, "reason": st.text(max_size=4)})), max_size=3)
STEP = st.tuples(st.lists(OPS, max_size=4), FOCUS, st.booleans())
EPISODE = st.lists(st.lists(STEP, min_size=1, max_size=4), min_size=1, max_size=4)


def _drive(episode) -> tuple[FlowStateRuntime, list]:
    """Run an episode directly on the runtime, checking invariants after every step."""
    runtime = FlowStateRuntime()
    snapshots: dict[str, object] = {}
    disclosed_ever: set[str] = set()
    for steps in episode:
        runtime.begin_request("q")
        for t, (ops, focus, tool) in enumerate(steps, 1):
            effects = runtime.apply(ops, focus)
            disclosed_ever.update(effects.disclosed)
            # Every visible node was created this request or explicitly disclosed.
            for node in runtime.active_nodes():
                assert runtime.is_current(node.state_id) or node.state_id in disclosed_ever
            # Historical nodes never change or vanish.
            for state_id, snapshot in snapshots.items():
                assert runtime.repository.get(state_id) == snapshot
            if tool:
                runtime.add_observation(t, f"raw {t}", "raw")
        runtime.end_request()
        disclosed_ever.clear()
        for node in runtime.repository.nodes():
            snapshots.setdefault(node.state_id, node)
    return runtime, list(snapshots)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(EPISODE)
def test_history_is_immutable_and_disclosure_is_explicit(episode):
    runtime, ids = _drive(episode)
    assert [n.state_id for n in runtime.repository.nodes()] == ids


@settings(max_examples=100, deadline=None)
@given(EPISODE)
def test_json_round_trip_is_lossless(episode):
    runtime, _ = _drive(episode)
    text = json.dumps(runtime.repository.export().model_dump(mode="json"))
    again = Repository.from_export(json.loads(text))
    assert again.export() == runtime.repository.export() and again.index() == runtime.repository.index()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(EPISODE)
def test_replaying_step_records_rebuilds_the_repository(episode):
    script, requests = [], []
    for k, steps in enumerate(episode, 1):
        requests.append(f"request {k}")
        for ops, focus, tool in steps:
            script.append(tagged(focus=focus, delta=ops, calls=[{"name": "t", "arguments": {}}] if tool else []))
        script.append(tagged(message=f"done {k}"))
    session = new_session("flowstate", TaskPrompt(task_policy="", available_tools=""))
    result = asyncio.run(run_episode(session, ScriptedPolicyFixture(script), EnvironmentFixture(requests, tools={"t": "raw"})))
    assert rebuild_repository(result.steps).export() == result.repository


TAGS = st.sampled_from(["<state_focus>", "</state_focus>", "<state_delta>", "</state_delta>", "<tool_calls>",
                        "</tool_calls>", "<assistant_message>", "</assistant_message>", "```", "```json", "{", "}", "[", "]",
                        '"content"', '"name"', '"arguments"', ":", ",", "null"])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=20), TAGS, JSON_VALUES.map(json.dumps)), max_size=20),
       st.sampled_from(list(ProtocolMode)))
def test_the_parser_never_raises(pieces, mode):
    out = parse_output("".join(pieces), mode)
    assert all(call.name.strip() for call in out.tool_calls)
    assert out.assistant_message is None or out.assistant_message.strip()
    assert isinstance(out.state_focus, list) and isinstance(out.state_delta, list)
    if not "".join(pieces).strip():
        assert not out.usable and out.errors == ["empty output"]


# The built-in methods, those that read their released prompts from the data folder apart.
SELF_CONTAINED_METHODS = ["flowstate", "full_context", "flowstate_no_psa", "flowstate_no_isu", "bm25", "mem0"]
RELEASED_PROMPT_METHODS = ["zipact", "zipact_bm25", "reasoningbank"]
PROTOCOLS = st.sampled_from(["tagged", "json"])
CANARIES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=12, max_size=16)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(method=st.sampled_from(SELF_CONTAINED_METHODS), protocol=PROTOCOLS, canary=CANARIES)
def test_no_memory_crosses_from_one_episode_to_the_next(method, protocol, canary):
    """A canary in one episode's requests, observations, states and memory never reaches another episode."""
    _no_memory_crosses(method, protocol, canary)


@pytest.mark.usefixtures("released_prompts")  # it only sets $FLOWSTATE_DATA, the same for every example
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(method=st.sampled_from(RELEASED_PROMPT_METHODS), protocol=PROTOCOLS, canary=CANARIES)
def test_no_memory_crosses_from_one_episode_to_the_next_with_released_prompts(method, protocol, canary):
    _no_memory_crosses(method, protocol, canary)


def _no_memory_crosses(method: str, protocol: str, canary: str) -> None:
    task = TaskPrompt(task_policy="P", available_tools="T")

    def episode(marker: str) -> ScriptedPolicyFixture:
        node = {"state_set": "knowledge", "operation": "add", "state_id": f"n_{marker}", "summary": marker,
                "value": {"v": marker}, "refs": []}
        outputs = [tagged(delta=[node], calls=[{"name": "look", "arguments": {"q": marker}}]), tagged(message=marker)] * 2
        if protocol == "json":
            outputs = [json.dumps({"state_focus": [], "state_delta": [node],
                                   "tool_calls": [{"name": "look", "arguments": {"q": marker}}],
                                   "assistant_message": {"content": None}}),
                       json.dumps({"state_focus": [], "state_delta": [], "tool_calls": [],
                                   "assistant_message": {"content": marker}})] * 2
        policy = ScriptedPolicyFixture(outputs)
        env = EnvironmentFixture([f"first {marker}", f"again {marker}"], tools={"look": f"result {marker}"})
        callers = MethodCallers(memory=UnchangedStatePolicy(), embeddings=BagOfWordsEmbedderFixture())
        asyncio.run(run_episode(new_session({"name": method, "protocol": protocol}, task, ["look"], callers), policy, env))
        return policy

    episode(canary)
    later = episode("otherepisode")
    assert all(canary not in m.content for call in later.calls for m in call)
    assert any("otherepisode" in m.content for call in later.calls[1:] for m in call)  # its own memory does show
