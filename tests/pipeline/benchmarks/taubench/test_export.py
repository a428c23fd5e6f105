"""Export to the upstream tau2-bench results format (field names: src/tau2/data_model/simulation.py
and message.py of sierra-research/tau2-bench)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.benchmarks.taubench import ActionCheck, CommunicateCheck, DBCheck, RewardInfo
from pipeline.benchmarks.taubench.export import export_tau2
from pipeline.store.files import NoResultsError
from tests.pipeline.analysis.builder import SweepBuilder

DATA = Path("/work/shared/benchmarks")
TASKS = json.loads((DATA / "taubench" / "airline" / "tasks.json").read_text())

TRANSCRIPT = [
    {"seq": 0, "request": 0, "role": "assistant", "content": "Hi! How can I help you today?"},
    {"seq": 1, "request": 1, "role": "user", "content": "I am raj_sanchez_7340."},
    {"seq": 2, "request": 1, "role": "assistant", "content": None,
     "tool_calls_json": json.dumps([{"id": "call-1", "name": "get_user_details", "arguments": {"user_id": "raj_sanchez_7340"}}])},
    {"seq": 3, "request": 1, "role": "tool", "content": '{"user_id": "raj_sanchez_7340"}', "tool_call_id": "call-1",
     "error": False},
    {"seq": 4, "request": 1, "role": "assistant", "content": "I found your profile."},
    {"seq": 5, "request": 1, "role": "user", "content": "###STOP###"},
]


def reward_info(graded: bool = True) -> str:
    return RewardInfo(
        reward=1.0 if graded else 0.0, basis="task", reward_basis=["DB", "COMMUNICATE"],
        termination="user_stop" if graded else "max_steps", graded=graded,
        components={"DB": 1.0, "COMMUNICATE": 1.0} if graded else {},
        db=DBCheck(match=True, predicted_hash="p", gold_hash="p") if graded else None,
        communicate_checks=[CommunicateCheck(info="Q69X3R", met=True)] if graded else [],
        action_checks=[ActionCheck(action_id="1_0", name="get_user_details", kind="read", matched=True),
                       ActionCheck(action_id="1_1", name="get_reservation_details", kind="read", matched=False)]
        if graded else [],
        read_accuracy=0.5 if graded else None,
    ).model_dump_json()


def sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, methods: tuple[str, ...] = ("flowstate",)) -> SweepBuilder:
    monkeypatch.setenv("FLOWSTATE_DATA", str(DATA))
    b = SweepBuilder(tmp_path)
    for method in methods:
        b.episode(method=method, task="1", trial=0, reward=1.0, transcript=TRANSCRIPT, grading_json=reward_info(),
                  seed=42, n_requests=1, n_steps=2)
        b.episode(method=method, task="0", trial=0, reward=0.0, termination="max_steps", graded=False,
                  transcript=TRANSCRIPT[:2], grading_json=reward_info(graded=False))
        b.episode(method=method, task="2", trial=0, status="failed", reward=None)  # not exported
    b.manifest(job={"trials": 1, "seed": 300,
                    "benchmarks": [{"benchmark": "taubench", "domain": "airline", "max_env_steps": 30, "max_errors": 5}],
                    "agents": [{"deployment": "m1", "sampling": {"temperature": 0.1}}],
                    "user_simulator": {"deployment": "u1", "sampling": {"temperature": 0.0}}})
    return b


def test_export_in_upstream_shape(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b = sweep(tmp_path, monkeypatch)
    [path] = export_tau2(b.sweep_dir, tmp_path / "results.json").paths
    results: dict[str, Any] = json.loads(path.read_text())
    assert set(results) == {"timestamp", "info", "tasks", "simulations"}
    info = results["info"]
    assert (info["git_commit"], info["num_trials"], info["max_steps"], info["max_errors"], info["seed"]) == (
        "abc123", 1, 30, 5, 300)
    assert info["agent_info"] == {"implementation": "flowstate:flowstate", "llm": "m1", "llm_args": {"temperature": 0.1}}
    assert (info["user_info"]["implementation"], info["user_info"]["llm"]) == ("user_simulator", "u1")
    assert info["environment_info"]["domain_name"] == "airline"
    assert info["environment_info"]["policy"] == (DATA / "taubench" / "airline" / "policy.md").read_text()
    # the exported tasks, verbatim upstream records
    assert sorted(results["tasks"], key=lambda t: t["id"]) == [t for t in TASKS if t["id"] in ("0", "1")]

    sims = {s["task_id"]: s for s in results["simulations"]}
    assert set(sims) == {"0", "1"}  # the infrastructure failure is left out
    sim = sims["1"]
    assert (sim["trial"], sim["seed"], sim["termination_reason"], sim["duration"]) == (0, 42, "user_stop", 10.0)
    assert sim["id"] == b.ids(domain="airline", method="flowstate", model="m1", task="1", trial=0)["episode_id"]
    assert sim["start_time"].startswith("2026-01-01T00:00:00") and sim["end_time"].startswith("2026-01-01T00:00:10")
    messages = sim["messages"]
    assert [m["role"] for m in messages] == ["assistant", "user", "assistant", "tool", "assistant", "user"]
    assert [m["turn_idx"] for m in messages] == list(range(6))
    call = messages[2]["tool_calls"][0]
    assert call == {"id": "call-1", "name": "get_user_details", "arguments": {"user_id": "raj_sanchez_7340"},
                    "requestor": "assistant"}
    assert (messages[3]["id"], messages[3]["error"], messages[3]["requestor"]) == ("call-1", False, "assistant")
    assert messages[0]["tool_calls"] is None and messages[0]["content"] == "Hi! How can I help you today?"

    reward = sim["reward_info"]
    assert (reward["reward"], reward["reward_basis"]) == (1.0, ["DB", "COMMUNICATE"])
    assert reward["db_check"] == {"db_match": True, "db_reward": 1.0}
    assert reward["reward_breakdown"] == {"DB": 1.0, "COMMUNICATE": 1.0}
    assert reward["communicate_checks"] == [{"info": "Q69X3R", "met": True, "justification": ""}]
    gold = {a["action_id"]: a for a in TASKS[1]["evaluation_criteria"]["actions"]}
    assert [(c["action"], c["action_match"], c["action_reward"], c["tool_type"]) for c in reward["action_checks"]] == [
        (gold["1_0"], True, 1.0, "read"), (gold["1_1"], False, 0.0, "read")]
    assert reward["nl_assertions"] is None and reward["env_assertions"] is None
    gated = sims["0"]
    assert gated["termination_reason"] == "max_steps" and gated["reward_info"]["reward"] == 0.0
    assert "terminated prematurely" in gated["reward_info"]["info"]["note"]


def test_one_file_per_cell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b = sweep(tmp_path, monkeypatch, methods=("flowstate", "full_context"))
    paths = export_tau2(b.sweep_dir, tmp_path / "out" / "results.json").paths
    assert sorted(p.name for p in paths) == ["results.taubench.airline.flowstate.m1.json",
                                             "results.taubench.airline.full_context.m1.json"]
    methods = {json.loads(p.read_text())["info"]["agent_info"]["implementation"] for p in paths}
    assert methods == {"flowstate:flowstate", "flowstate:full_context"}


def test_nothing_to_export(tmp_path: Path) -> None:
    b = SweepBuilder(tmp_path)
    b.episode(task="1", status="failed", reward=None)
    with pytest.raises(NoResultsError, match="no scored τ-bench episodes"):
        export_tau2(b.sweep_dir, tmp_path / "results.json")


def test_upstream_models_load_the_export(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With upstream tau2-bench importable (not a dependency of this project), its own models and
    metrics read the file."""
    simulation = pytest.importorskip("tau2.data_model.simulation")
    metrics = pytest.importorskip("tau2.metrics.agent_metrics")
    [path] = export_tau2(sweep(tmp_path, monkeypatch).sweep_dir, tmp_path / "results.json").paths
    results = simulation.Results.load(path)
    assert metrics.compute_metrics(results).avg_reward == pytest.approx(0.5)


@pytest.mark.parametrize("arguments", [None, "x", [1, 2]])
def test_a_recorded_call_with_non_object_arguments_is_left_out_and_named_not_written_as_empty(
        arguments: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Sweeps recorded before such calls became protocol errors: upstream would replay ``{}``, not what ran."""
    from pipeline.cli.main import main

    b = sweep(tmp_path, monkeypatch)
    odd = [dict(m) for m in TRANSCRIPT]
    odd[2]["tool_calls_json"] = json.dumps([{"id": "call-1", "name": "get_user_details", "arguments": arguments}])
    b.episode(method="flowstate", task="3", trial=0, reward=0.0, transcript=odd, grading_json=reward_info(), seed=1)
    exported = export_tau2(b.sweep_dir, tmp_path / "results.json")
    sims = json.loads(exported.paths[0].read_text())["simulations"]
    assert sorted(s["task_id"] for s in sims) == ["0", "1"]
    [skipped] = exported.skipped
    assert "(task 3): the arguments of its 'get_user_details' call are not an object" in skipped
    assert main(["export", "tau2", str(b.sweep_dir), "--out", str(tmp_path / "again.json")]) == 0
    assert "left out episode" in capsys.readouterr().err
