"""Validate_upd and Validate_acc (appendix B.4), rule by rule, through the runtime."""

from __future__ import annotations

import pytest

from flowstate import FlowStateRuntime, Reason
from tests.flowstate.fixtures import add


def _history(runtime: FlowStateRuntime) -> None:
    """Request 1 leaves: h_pref (model), h_dec -> refs h_pref and obs_1_1; obs_1_1 persisted."""
    runtime.begin_request("q1")
    runtime.apply([add("h_pref", "preference")], [])
    runtime.add_observation(1, '{"price": 200}', "raw")
    runtime.apply([add("h_dec", "judgement", refs=[("derives", "h_pref"), ("supports", "obs_1_1")])], [])
    runtime.add_observation(2, "unreferenced", "raw")
    runtime.end_request()
    runtime.begin_request("q2")


def _reasons(effects) -> list[Reason]:
    return [r.reason for r in effects.rejected_ops]


# -- add ------------------------------------------------------------------------------------------
def test_add_with_a_fresh_id_is_committed(runtime):
    _history(runtime)
    effects = runtime.apply([add("new_state")], [])
    assert [op.state_id for op in effects.accepted_ops] == ["new_state"]
    assert runtime.is_current("new_state")


@pytest.mark.parametrize("state_id", ["h_pref", "h_dec", "obs_1_1"])
def test_add_rejects_an_id_used_in_the_repository(runtime, state_id):
    _history(runtime)
    effects = runtime.apply([add(state_id)], [])
    assert effects.accepted_ops == []
    assert _reasons(effects) == [Reason.RESERVED_ID if state_id.startswith("obs_") else Reason.ID_IN_USE]


def test_add_rejects_an_id_of_the_active_state(runtime):
    _history(runtime)
    runtime.apply([add("a")], [])
    assert _reasons(runtime.apply([add("a")], [])) == [Reason.ID_IN_USE]


def test_add_rejects_a_disclosed_historical_id(runtime):
    _history(runtime)
    runtime.apply([], [{"target_id": "h_pref", "reason": "r"}])
    assert _reasons(runtime.apply([add("h_pref")], [])) == [Reason.ID_IN_USE]


@pytest.mark.parametrize("state_id", ["obs_2_1", "obs_9_9", "obs_1_2"])
def test_add_rejects_reserved_observation_ids(runtime, state_id):
    _history(runtime)
    runtime.add_observation(1, "x", "raw")
    assert _reasons(runtime.apply([add(state_id)], [])) == [Reason.RESERVED_ID]


def test_add_accepts_ids_that_only_look_like_observations(runtime):
    _history(runtime)
    effects = runtime.apply([add("obs_notes"), add("obs_1_x")], [])
    assert [op.state_id for op in effects.accepted_ops] == ["obs_notes", "obs_1_x"]


# -- update / remove --------------------------------------------------------------------------
def test_update_changes_only_written_fields(runtime):
    _history(runtime)
    runtime.apply([add("plan", "judgement", summary="old", value={"step": 1})], [])
    effects = runtime.apply([{"operation": "update", "state_id": "plan", "summary": "new"}], [])
    assert [op.state_id for op in effects.accepted_ops] == ["plan"]
    node = next(n for n in runtime.active_nodes() if n.state_id == "plan")
    assert (node.summary, node.value, node.type.value) == ("new", {"step": 1}, "judgement")


def test_update_can_change_type_value_and_refs(runtime):
    _history(runtime)
    runtime.apply([add("plan", "judgement"), add("other")], [])
    runtime.apply([{"operation": "update", "state_id": "plan", "state_set": "artifacts", "value": None,
                    "refs": [{"rel": "follows", "state_id": "other"}]}], [])
    node = next(n for n in runtime.active_nodes() if n.state_id == "plan")
    assert node.type.value == "artifact" and node.value is None
    assert [(r.rel.value, r.state_id) for r in node.refs] == [("follows", "other")]


@pytest.mark.parametrize("operation", ["update", "remove"])
def test_update_and_remove_reject_disclosed_historical_states(runtime, operation):
    _history(runtime)
    runtime.apply([], [{"target_id": "h_dec", "reason": "r"}])
    assert runtime.is_visible("h_dec")
    effects = runtime.apply([{"operation": operation, "state_id": "h_dec", "summary": "x"}], [])
    assert _reasons(effects) == [Reason.NOT_CURRENT_REQUEST]
    assert runtime.repository.get("h_dec").summary == "summary of h_dec"


@pytest.mark.parametrize("operation", ["update", "remove"])
def test_update_and_remove_reject_states_not_in_the_active_state(runtime, operation):
    _history(runtime)
    for target in ("h_pref", "nowhere"):
        effects = runtime.apply([{"operation": operation, "state_id": target, "summary": "x"}], [])
        assert _reasons(effects) == [Reason.NOT_IN_ACTIVE_STATE]


def test_remove_deletes_a_current_state(runtime):
    _history(runtime)
    runtime.apply([add("tmp")], [])
    effects = runtime.apply([{"operation": "remove", "state_id": "tmp"}], [])
    assert [op.operation for op in effects.accepted_ops] == ["remove"]
    assert not runtime.is_visible("tmp")


# -- refs -----------------------------------------------------------------------------------------
def test_refs_may_target_active_index_current_observations_and_tool_refs(runtime):
    _history(runtime)
    runtime.add_observation(1, "fresh", "raw")
    runtime.apply([add("mine")], [{"target_id": "h_dec", "reason": "r"}])
    # h_dec is now visible and refs obs_1_1, which makes obs_1_1 a ToolRef of the Active State.
    effects = runtime.apply(
        [add("linked", refs=[("supports", "mine"), ("derives", "h_pref"), ("supports", "obs_2_1"),
                             ("supports", "obs_1_1"), ("follows", "h_dec")])],
        [],
    )
    assert [op.state_id for op in effects.accepted_ops] == ["linked"]


@pytest.mark.parametrize("target", ["missing", "obs_1_2", "obs_2_5"])
def test_refs_to_unknown_or_unreachable_ids_are_rejected(runtime, target):
    # obs_1_2 was never referenced (not persisted); obs_2_5 does not exist yet.
    _history(runtime)
    effects = runtime.apply([add("x", refs=[("supports", target)])], [])
    assert _reasons(effects) == [Reason.UNKNOWN_REF]


def test_a_persisted_observation_needs_a_disclosed_referrer_to_be_ref_able(runtime):
    _history(runtime)
    assert _reasons(runtime.apply([add("x", refs=[("supports", "obs_1_1")])], [])) == [Reason.UNKNOWN_REF]
    runtime.apply([], [{"target_id": "h_dec", "reason": "r"}])
    assert _reasons(runtime.apply([add("y", refs=[("supports", "obs_1_1")])], [])) == []


def test_self_refs_are_rejected(runtime):
    _history(runtime)
    runtime.apply([add("a")], [])
    effects = runtime.apply([add("b", refs=[("supports", "b")]),
                             {"operation": "update", "state_id": "a", "refs": [{"rel": "supports", "state_id": "a"}]}], [])
    assert _reasons(effects) == [Reason.SELF_REF, Reason.SELF_REF]


def test_a_bad_relation_type_is_malformed(runtime):
    _history(runtime)
    effects = runtime.apply([add("a", refs=[("causes", "h_pref")])], [])
    assert _reasons(effects) == [Reason.MALFORMED]


# -- ordering within one delta ------------------------------------------------------------
def test_later_ops_see_earlier_ops_of_the_same_delta(runtime):
    _history(runtime)
    effects = runtime.apply(
        [add("a"), add("b", refs=[("derives", "a")]), {"operation": "update", "state_id": "a", "summary": "s2"},
         {"operation": "remove", "state_id": "b"}, add("b")],
        [],
    )
    assert [(op.operation, op.state_id) for op in effects.accepted_ops] == [
        ("add", "a"), ("add", "b"), ("update", "a"), ("remove", "b"), ("add", "b")]


def test_one_failing_op_does_not_block_the_others(runtime):
    _history(runtime)
    effects = runtime.apply([add("ok1"), add("h_pref"), {"operation": "explode"}, "not an op", add("ok2")], [])
    assert [op.state_id for op in effects.accepted_ops] == ["ok1", "ok2"]
    assert _reasons(effects) == [Reason.ID_IN_USE, Reason.MALFORMED, Reason.MALFORMED]


# -- Validate_acc ---------------------------------------------------------------------------------
def test_access_accepts_index_ids_and_discloses_them(runtime):
    _history(runtime)
    effects = runtime.apply([], [{"target_id": "h_pref", "reason": "need it"}])
    assert effects.focus_accepted == ["h_pref"] and effects.disclosed == ["h_pref"]
    assert runtime.is_visible("h_pref") and not runtime.is_current("h_pref")


def test_access_to_tool_refs_requires_a_referrer_in_the_active_state(runtime):
    _history(runtime)
    rejected = runtime.apply([], [{"target_id": "obs_1_1", "reason": "raw"}])
    assert [r.reason for r in rejected.focus_rejected] == [Reason.NOT_ACCESSIBLE]
    runtime.apply([], [{"target_id": "h_dec", "reason": "r"}])
    accepted = runtime.apply([], [{"target_id": "obs_1_1", "reason": "raw"}])
    assert accepted.disclosed == ["obs_1_1"]
    node = next(n for n in runtime.active_nodes() if n.state_id == "obs_1_1")
    assert node.value == '{"price": 200}' and node.origin.value == "tool"


@pytest.mark.parametrize("target", ["unknown", "obs_1_2", "obs_2_1"])
def test_access_rejects_ids_outside_the_index_and_tool_refs(runtime, target):
    _history(runtime)
    runtime.add_observation(1, "current but unreferenced", "raw")
    effects = runtime.apply([], [{"target_id": target, "reason": "r"}])
    assert effects.focus_accepted == [] and [r.reason for r in effects.focus_rejected] == [Reason.NOT_ACCESSIBLE]


def test_access_to_a_visible_id_is_accepted_and_discloses_nothing(runtime):
    _history(runtime)
    runtime.apply([add("mine")], [{"target_id": "h_pref", "reason": "r"}])
    effects = runtime.apply([], [{"target_id": "h_pref", "reason": "again"}, {"target_id": "mine", "reason": "x"}])
    assert effects.focus_accepted == ["h_pref", "mine"] and effects.disclosed == []


def test_access_is_validated_before_the_same_steps_delta_is_committed(runtime):
    """Validate_acc sees S_k,t: a ref added by this step's ISU makes a ToolRef only from the next step."""
    _history(runtime)
    runtime.add_observation(1, "current raw result", "raw")
    same_step = runtime.apply([add("n", refs=[("supports", "obs_2_1")])], [{"target_id": "obs_2_1", "reason": "r"}])
    assert [op.state_id for op in same_step.accepted_ops] == ["n"]
    assert [r.reason for r in same_step.focus_rejected] == [Reason.NOT_ACCESSIBLE]
    next_step = runtime.apply([], [{"target_id": "obs_2_1", "reason": "r"}])
    assert next_step.disclosed == ["obs_2_1"]


def test_disclosure_reveals_relations_but_not_related_content(runtime):
    _history(runtime)
    runtime.apply([], [{"target_id": "h_dec", "reason": "r"}])
    visible = {n.state_id: n for n in runtime.active_nodes()}
    assert set(visible) == {"h_dec"}
    assert {r.state_id for r in visible["h_dec"].refs} == {"h_pref", "obs_1_1"}


def test_malformed_focus_items_are_rejected_not_raised(runtime):
    _history(runtime)
    effects = runtime.apply([], [{"reason": "no id"}, 42, "h_pref"])
    assert effects.focus_accepted == ["h_pref"]
    assert [r.reason for r in effects.focus_rejected] == [Reason.MALFORMED, Reason.MALFORMED]
