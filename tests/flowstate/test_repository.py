"""The Persistent State Repository: append-only, immutable history, lossless JSON round trip."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from flowstate import Origin, Ref, Repository, RepositoryExport, RequestRecord, StateNode


def _node(state_id: str, request: int, origin: Origin = Origin.MODEL, **kw) -> StateNode:
    return StateNode(state_id=state_id, type="knowledge", summary=f"s {state_id}", source_request=request, origin=origin, **kw)


def test_persist_appends_in_order_and_rejects_out_of_order_requests():
    repo = Repository()
    repo.persist(RequestRecord(query_id=1, query="a"), [_node("x", 1)])
    with pytest.raises(ValueError, match="expected query_id 2"):
        repo.persist(RequestRecord(query_id=3, query="c"), [])


def test_historical_nodes_cannot_be_overwritten_or_mutated():
    repo = Repository()
    repo.persist(RequestRecord(query_id=1, query="a"), [_node("x", 1)])
    with pytest.raises(ValueError, match="immutable"):
        repo.persist(RequestRecord(query_id=2, query="b"), [_node("x", 2)])
    with pytest.raises(ValidationError):
        repo.get("x").summary = "changed"  # type: ignore[misc]  # a frozen field: the assignment must fail
    assert repo.get("x").summary == "s x" and len(repo.requests) == 1


def test_nodes_must_belong_to_the_request_they_are_persisted_with():
    with pytest.raises(ValueError, match="source_request"):
        Repository().persist(RequestRecord(query_id=1, query="a"), [_node("x", 2)])


def test_json_round_trip_is_lossless():
    repo = Repository()
    repo.persist(RequestRecord(query_id=1, query="book \u00e9 hotel"), [
        _node("pref", 1, value={"nested": [1, 2.5, None, {"k": "v"}]}),
        _node("obs_1_1", 1, origin=Origin.TOOL, value='{"raw": true}'),
    ])
    repo.persist(RequestRecord(query_id=2, query="second"), [
        _node("dec", 2, refs=(Ref(rel="supersedes", state_id="pref"), Ref(rel="supports", state_id="obs_1_1"))),
    ])
    text = json.dumps(repo.export().model_dump(mode="json"))
    again = Repository.from_export(json.loads(text))
    assert again.export() == repo.export()
    assert again.index() == repo.index()
    assert json.dumps(again.export().model_dump(mode="json")) == text


def test_an_export_with_orphan_nodes_is_rejected():
    export = RepositoryExport(requests=[], nodes=[_node("x", 1)])
    with pytest.raises(ValueError, match="not in the export"):
        Repository.from_export(export)


def test_state_types_accept_the_papers_spellings():
    for spelling, expected in [("preferences", "preference"), ("Attributes", "attribute"), ("judgements", "judgement"),
                               ("judgment", "judgement"), ("artifacts", "artifact"), ("knowledge", "knowledge")]:
        assert StateNode(state_id="n", type=spelling, summary="", source_request=1).type.value == expected
    with pytest.raises(ValidationError, match="unknown state type"):
        StateNode(state_id="n", type="belief", summary="", source_request=1)
