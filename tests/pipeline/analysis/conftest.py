"""Hand-made sweeps whose metrics are worked out by hand in the tests that use them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.pipeline.analysis.builder import SweepBuilder

# (task, trial) -> (reward, db, action, termination); worked-out metrics live in test_metrics.py.
FULL_CONTEXT = {
    ("A", 0): (1.0, 1.0, 1.0, "user_stop"), ("A", 1): (1.0, 1.0, 1.0, "user_stop"), ("A", 2): (0.0, 0.0, 0.0, "user_stop"),
    ("B", 0): (0.0, 1.0, 0.0, "user_stop"), ("B", 1): (0.0, 0.0, 0.0, "agent_stop"), ("B", 2): (0.0, None, None, "max_steps"),
    ("C", 0): (1.0, 1.0, 0.0, "user_stop"), ("C", 1): (1.0, 1.0, 0.0, "user_stop"), ("C", 2): (1.0, 1.0, 0.0, "user_stop"),
}
FLOWSTATE = {
    ("A", 0): (1.0, 1.0, 1.0, "user_stop"), ("A", 1): (1.0, 1.0, 1.0, "user_stop"), ("A", 2): (1.0, 1.0, 1.0, "user_stop"),
    ("B", 0): (1.0, 1.0, 0.0, "user_stop"), ("B", 1): (0.0, 1.0, 0.0, "user_stop"), ("B", 2): (0.0, 0.0, 0.0, "user_stop"),
}
FLOWSTATE_STEPS = [  # episode flowstate / A / trial 0
    {"request": 1, "step": 1, "query": "change my flight", "n_proposed_ops": 3,
     "accepted_ops": [{"operation": "add", "state_id": "a"}, {"operation": "add", "state_id": "b"}],
     "rejected_ops": [{"operation": "add", "state_id": "x", "reason": "id_in_use", "detail": "x exists"}],
     "tool_calls": [{"id": "call-1", "name": "get_user_details", "arguments_json": '{"user_id": "u1"}'}],
     "latency_s": 1.0, "active_nodes": 2, "active_state_tokens": 40, "index_states": 0, "prompt_tokens": 100,
     "completion_tokens": 10},
    {"request": 1, "step": 2, "n_proposed_ops": 1, "accepted_ops": [{"operation": "update", "state_id": "a"}],
     "parse_errors": ["unclosed <state_delta>"], "n_parse_errors": 1, "protocol_warnings": ["repaired JSON"],
     "latency_s": 2.0, "active_nodes": 4, "active_state_tokens": 80, "index_states": 0, "prompt_tokens": 140,
     "completion_tokens": 10, "assistant_message": "Done."},
    {"request": 2, "step": 1, "query": "and the bags?", "n_proposed_ops": 2,
     "rejected_ops": [{"operation": "update", "state_id": "a", "reason": "not_in_active_state", "detail": ""},
                      {"operation": "add", "state_id": "q", "reason": "malformed", "detail": ""}],
     "focus_requested": ["a", "zz"], "focus_accepted": ["a"],
     "focus_rejected": [{"operation": "focus", "state_id": "zz", "reason": "not_accessible", "detail": ""}],
     "disclosed": ["a", "b"], "disclosed_from": [1, 1],
     "latency_s": 3.0, "active_nodes": 3, "active_state_tokens": 60, "index_states": 2, "prompt_tokens": 120,
     "completion_tokens": 10},
    {"request": 3, "step": 1, "query": "thanks", "n_proposed_ops": 0, "focus_requested": ["c"], "focus_accepted": ["c"],
     "disclosed": ["c", "a"], "disclosed_from": [2, 1],
     "latency_s": 4.0, "active_nodes": 5, "active_state_tokens": 90, "index_states": 3, "prompt_tokens": 160,
     "completion_tokens": 10},
]


def _tokens(prompt: int, completion: int) -> dict[str, int]:
    return {"agent_prompt_tokens": prompt, "agent_completion_tokens": completion}


def build_scores_sweep(root: Path, sweep_id: str = "sweep-a") -> SweepBuilder:
    """Airline, model m1: full_context on tasks A–C, flowstate on A–B (3 trials each), plus one
    infrastructure failure and one grading failure of flowstate, steps and messages for one episode."""
    b = SweepBuilder(root, sweep_id)
    for (task, trial), (reward, db, action, termination) in FULL_CONTEXT.items():
        graded = termination != "max_steps"
        b.episode(method="full_context", task=task, trial=trial, reward=reward, db=db, action=action,
                  communicate=1.0 if graded else None, termination=termination, graded=graded, n_requests=2,
                  agent_cached_tokens=600, **_tokens(1000, 100))
    for (task, trial), (reward, db, action, termination) in FLOWSTATE.items():
        steps = FLOWSTATE_STEPS if (task, trial) == ("A", 0) else None
        messages = None
        if steps:
            messages = [{"seq": i, "caller": "agent", "request": s["request"], "step": s["step"],
                         "prompt_json": '[{"role": "user", "content": "hi"}]', "completion": f"completion {i}",
                         "latency_s": s["latency_s"], "served_model": "m1"} for i, s in enumerate(steps)]
            messages += [{"seq": 4 + i, "caller": "user_simulator", "latency_s": lat, "served_model": "u",
                          "served_by": "http://127.0.0.1:9000/v1"} for i, lat in enumerate((0.5, 1.5))]
        tokens = _tokens(800, 100) if (task, trial) == ("B", 0) else _tokens(500, 50)
        if steps:
            tokens["agent_cached_tokens_estimate"] = 250
        b.episode(method="flowstate", task=task, trial=trial, reward=reward, db=db, action=action, communicate=1.0,
                  termination=termination, n_requests=3 if steps else 1, steps=steps, messages=messages, **tokens)
    b.episode(method="flowstate", task="B", trial=3, status="grading_failed", reward=None, termination="user_stop",
              graded=False, n_requests=1, **_tokens(300, 30))
    b.episode(method="flowstate", task="A", trial=3, status="failed", reward=None, termination="infrastructure_error",
              graded=False)
    b.manifest()
    return b


@pytest.fixture
def scores_sweep(tmp_path: Path) -> SweepBuilder:
    return build_scores_sweep(tmp_path / "runs")
