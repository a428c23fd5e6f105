"""Persist (eq. 4), observations as evidence, and the request lifecycle."""

from __future__ import annotations

import pytest

from flowstate import FlowStateRuntime, Origin
from tests.flowstate.fixtures import add


def test_observation_ids_follow_request_and_step(runtime):
    runtime.begin_request("q1")
    assert runtime.add_observation(3, "x", "raw").obs_id == "obs_1_3"
    runtime.end_request()
    runtime.begin_request("q2")
    assert runtime.add_observation(1, "y", "raw").obs_id == "obs_2_1"
    with pytest.raises(ValueError):
        runtime.add_observation(1, "again", "raw")


def test_only_referenced_observations_are_persisted_as_knowledge(runtime):
    runtime.begin_request("q1")
    runtime.add_observation(1, "kept raw text", "raw 1")
    runtime.add_observation(2, "dropped", "raw 2")
    runtime.apply([add("fact", "attribute", refs=[("derives", "obs_1_1")])], [])
    runtime.end_request()
    obs = runtime.repository.get("obs_1_1")
    assert obs is not None and obs.type.value == "knowledge" and obs.origin is Origin.TOOL
    assert obs.value == "kept raw text" and obs.source_request == 1
    assert runtime.repository.get("obs_1_2") is None


def test_observations_referenced_only_by_removed_states_are_not_persisted(runtime):
    runtime.begin_request("q1")
    runtime.add_observation(1, "raw", "raw")
    runtime.apply([add("tmp", refs=[("supports", "obs_1_1")])], [])
    runtime.apply([{"operation": "remove", "state_id": "tmp"}], [])
    runtime.end_request()
    assert len(runtime.repository) == 0


def test_relations_to_nodes_removed_in_the_same_request_are_dropped(runtime):
    runtime.begin_request("q1")
    runtime.apply([add("gone"), add("kept", refs=[("follows", "gone")]), add("other")], [])
    runtime.apply([{"operation": "remove", "state_id": "gone"}], [])
    runtime.end_request()
    assert runtime.repository.get("kept").refs == ()
    assert runtime.repository.get("gone") is None


def test_index_lists_model_states_grouped_by_request_but_not_observations(runtime):
    runtime.begin_request("first query")
    runtime.add_observation(1, "raw", "raw")
    runtime.apply([add("a", refs=[("supports", "obs_1_1")]), add("b")], [])
    runtime.end_request()
    runtime.begin_request("second query")
    runtime.end_request()
    index = [e.model_dump() for e in runtime.index()]
    assert index == [
        {"user_query": "first query", "query_id": 1,
         "states": ({"state_id": "a", "summary": "summary of a"}, {"state_id": "b", "summary": "summary of b"})},
        {"user_query": "second query", "query_id": 2, "states": ()},
    ]


def test_disclosed_states_keep_their_source_request_and_stay_unchanged(runtime):
    runtime.begin_request("q1")
    runtime.apply([add("h")], [])
    runtime.end_request()
    before = runtime.repository.get("h")
    runtime.begin_request("q2")
    runtime.apply([], [{"target_id": "h", "reason": "r"}])
    runtime.apply([add("new", refs=[("supersedes", "h")])], [])
    runtime.end_request()
    assert runtime.repository.get("h") is before and before.source_request == 1
    assert runtime.repository.get("new").source_request == 2
    assert [n.state_id for n in runtime.repository.nodes()] == ["h", "new"]


def test_active_state_starts_empty_for_each_request(runtime):
    runtime.begin_request("q1")
    runtime.apply([add("a")], [])
    runtime.end_request()
    runtime.begin_request("q2")
    assert list(runtime.active_nodes()) == []


def test_lifecycle_misuse_is_an_error(runtime):
    with pytest.raises(RuntimeError):
        runtime.apply([], [])
    runtime.begin_request("q")
    with pytest.raises(RuntimeError):
        runtime.begin_request("again")


def test_runtime_resumes_from_an_existing_repository():
    first = FlowStateRuntime()
    first.begin_request("q1")
    first.apply([add("a")], [])
    first.end_request()
    second = FlowStateRuntime(first.repository)
    second.begin_request("q2")
    assert second.request_index == 2
    assert second.apply([], ["a"]).disclosed == ["a"]
