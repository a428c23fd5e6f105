"""The paper's operations by name (eqs. 1, 2, 4), each on its own as a function of the state it reads."""

from __future__ import annotations

from flowstate import (
    ActiveState,
    Observation,
    Origin,
    Repository,
    RequestRecord,
    StateNode,
    StateType,
    commit,
    disclose,
    index,
    persist,
    validate_acc,
    validate_upd,
)
from tests.flowstate.fixtures import add


def node(state_id: str, request: int, refs: tuple[tuple[str, str], ...] = (), origin: Origin = Origin.MODEL) -> StateNode:
    return StateNode(state_id=state_id, type=StateType.KNOWLEDGE, summary=f"s {state_id}", value={"v": state_id},
                     refs=tuple({"rel": rel, "state_id": t} for rel, t in refs), source_request=request, origin=origin)


def history() -> Repository:
    repo = Repository()
    repo.persist(RequestRecord(query_id=1, query="first"), [node("h1", 1), node("h2", 1, (("derives", "obs_1_1"),)),
                                                             node("obs_1_1", 1, origin=Origin.TOOL)])
    return repo


def test_validate_upd_checks_each_op_against_what_the_earlier_ones_left() -> None:
    state = ActiveState(request=2, repository=history())
    result = validate_upd([add("a"), add("b", refs=[("follows", "a")]), {"operation": "update", "state_id": "a"},
                           add("a"), {"operation": "remove", "state_id": "h1"}, {"operation": "bogus"}], state)
    assert [op.state_id for op in result.accepted] == ["a", "b", "a"]
    assert [(r.state_id, r.reason.value) for r in result.rejected] == [
        ("a", "id_in_use"), ("h1", "not_in_active_state"), ("", "malformed")]
    assert state.current == {}  # validation commits nothing


def test_commit_is_the_validated_delta_applied_and_changes_nothing_else() -> None:
    state = ActiveState(request=2, repository=history())
    ops = validate_upd([add("a"), {"operation": "update", "state_id": "a", "summary": "new"}, add("b"),
                        {"operation": "remove", "state_id": "b"}], state).accepted
    before = {"x": node("x", 2)}
    after = commit(before, ops, 2)
    assert list(after) == ["x", "a"] and after["a"].summary == "new" and after["a"].source_request == 2
    assert list(before) == ["x"]


def test_validate_acc_admits_the_index_and_tool_refs_of_the_step_it_was_asked_in() -> None:
    repo = history()
    state = ActiveState(request=2, repository=repo, disclosed={"h2": repo.get("h2")})
    result = validate_acc(["h1", "h2", "obs_1_1", "nowhere", {"reason": "no id"}, "h1"], state)
    assert result.requested == ["h1", "h2", "obs_1_1", "nowhere", "h1"]
    assert result.accepted == ["h1", "h2", "obs_1_1", "h1"]
    assert result.to_disclose == ["h1", "obs_1_1"]  # h2 is already visible; h1 once
    assert [r.reason.value for r in result.rejected] == ["not_accessible", "malformed"]
    # an access cannot use a ref the same step's delta adds
    fresh = ActiveState(request=2, repository=repo)
    assert validate_acc(["obs_1_1"], fresh).accepted == []


def test_disclose_returns_content_and_relations_of_what_is_not_yet_visible() -> None:
    repo = history()
    observations = {"obs_2_1": Observation(obs_id="obs_2_1", content="raw", summary="r")}
    state = ActiveState(request=2, repository=repo, current={"c": node("c", 2, (("derives", "obs_2_1"),))},
                        observations=observations)
    revealed = disclose(state, ["h2", "c", "obs_2_1"])
    assert list(revealed) == ["h2", "obs_2_1"]
    assert revealed["h2"].refs[0].state_id == "obs_1_1" and revealed["h2"].value == {"v": "h2"}
    assert revealed["obs_2_1"].origin is Origin.TOOL and revealed["obs_2_1"].source_request == 2


def test_persist_keeps_referenced_observations_drops_dangling_refs_and_index_lists_the_request() -> None:
    repo = history()
    observations = {f"obs_2_{t}": Observation(obs_id=f"obs_2_{t}", content=f"raw {t}", summary="r") for t in (1, 2)}
    retained = [node("kept", 2, (("derives", "obs_2_2"), ("follows", "removed"), ("supports", "h1")))]
    assert persist(repo, RequestRecord(query_id=2, query="second"), retained, observations) is repo
    assert [n.state_id for n in repo.nodes()][-2:] == ["kept", "obs_2_2"]  # obs_2_1 was referenced by nothing
    assert [r.state_id for r in repo.get("kept").refs] == ["obs_2_2", "h1"]
    assert [(e.query_id, [s.state_id for s in e.states]) for e in index(repo)] == [(1, ["h1", "h2"]), (2, ["kept"])]
