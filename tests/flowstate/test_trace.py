"""Trace replay on the shipped examples (jobs/traces/)."""

from __future__ import annotations

import json

import pytest

from flowstate import replay_trace
from flowstate.trace import TraceError
from tests.conftest import REPO_ROOT

TRACES = REPO_ROOT / "jobs" / "traces"


def _load(name: str) -> dict:
    return json.loads((TRACES / name).read_text())


def test_hotel_example_revisits_an_earlier_decision_through_psa():
    """Figure 1: D7 (dec_book_a) and its evidence are disclosed; D8 (dec_keep_a) supersedes it."""
    out = replay_trace(_load("hotel.json"))
    steps = {(s["request"], s["step"]): s for s in out["steps"]}
    assert steps[(3, 1)]["disclosed"] == ["dec_book_a"]
    assert [r["reason"] for r in steps[(3, 1)]["focus_rejected"]] == ["not_accessible"]
    assert steps[(3, 2)]["disclosed"] == ["hotel_a_terms", "obs_1_2"]
    assert [r["reason"] for r in steps[(3, 2)]["rejected_ops"]] == ["not_current_request"]
    assert [r["reason"] for r in steps[(2, 1)]["rejected_ops"]] == ["id_in_use"]
    nodes = {n["state_id"]: n for n in out["repository"]["nodes"]}
    assert nodes["dec_keep_a"]["source_request"] == 3 and nodes["dec_book_a"]["source_request"] == 1
    assert {"rel": "supersedes", "state_id": "dec_book_a"} in nodes["dec_keep_a"]["refs"]
    assert nodes["obs_1_2"]["origin"] == "tool" and "Cancellation costs $80." in nodes["obs_1_2"]["value"]
    assert [e["query_id"] for e in out["index"]] == [1, 2, 3]
    assert all(not s["state_id"].startswith("obs_") for e in out["index"] for s in e["states"])


def test_messy_outputs_become_recorded_errors_and_warnings():
    out = replay_trace(_load("messy-outputs.json"))
    errors = [s["parse_errors"] for s in out["steps"]]
    assert errors[2] == ["no protocol blocks found"] and errors[3][0].startswith("state_delta: invalid JSON")
    # the documented per-step text: the errors joined, null when there are none
    assert [s["parse_error"] for s in out["steps"]] == ["; ".join(e) or None for e in errors]
    assert out["steps"][0]["parse_error"] is None and out["steps"][2]["parse_error"] == "no protocol blocks found"
    assert out["steps"][0]["tool_calls"] == [{"id": "call_1_1_1", "name": "find_order", "arguments": {"user": "u1"}}]
    assert any("dropped the message" in w for w in out["steps"][4]["protocol_warnings"])
    nodes = [n["state_id"] for n in out["repository"]["nodes"]]
    assert nodes == ["goal_status", "order_w1", "obs_1_1", "cancelled_w1", "obs_2_3"]


@pytest.mark.parametrize("name", sorted(p.name for p in TRACES.glob("*.json")))
def test_every_shipped_trace_replays_to_its_expected_result(name):
    """The whole replay (every step's effects, the repository, the index) against the file the replay
    of this trace is expected to give (tests/golden/replays/; regenerate only for a deliberate change)."""
    expected = json.loads((REPO_ROOT / "tests" / "golden" / "replays" / name).read_text())
    assert replay_trace(_load(name)) == expected


def test_inconsistent_traces_are_clear_errors():
    with pytest.raises(TraceError, match="request 1 step 1: the completion calls tools"):
        calls = '<tool_calls>[{"name": "t", "arguments": {}}]</tool_calls>'
        replay_trace({"requests": [{"query": "q", "steps": [{"completion": calls}]}]})
    with pytest.raises(TraceError, match="an observation is given"):
        replay_trace({"requests": [{"query": "q", "steps": [{"completion": "<tool_calls>[]</tool_calls>", "observation": "x"}]}]})
