"""Every shipped metric against values worked out by hand from the fixtures in conftest.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipeline.analysis.query import run_query
from tests.pipeline.analysis.builder import SweepBuilder

FC, FS = "full_context", "flowstate"


def rows(name: str, runs: Path, **params: Any) -> list[dict[str, Any]]:
    return run_query(name, runs, params).to_pylist()


def by(rows_: list[dict[str, Any]], *keys: str) -> dict[Any, dict[str, Any]]:
    return {tuple(r[k] for k in keys) if len(keys) > 1 else r[keys[0]]: r for r in rows_}


def scores(runs: Path) -> dict[tuple[str, str], float | None]:
    return {(r["method"], r["metric"]): r["value"] for r in rows("scores", runs)}


def test_pass_rate_and_components(scores_sweep: SweepBuilder) -> None:
    r = by(rows("pass_rate", scores_sweep.sweep_dir), "method")
    fc, fs = r[FC], r[FS]
    s = scores(scores_sweep.sweep_dir)
    # full_context: rewards 1,1,0 | 0,0,0 | 1,1,1; B/2 gated by max_steps (db, communicate count as 0)
    assert (fc["tasks"], fc["episodes"], fc["evaluated"], fc["grading_failed"], fc["failed"]) == (3, 9, 8, 0, 0)
    assert fc["pass_rate"] == pytest.approx(5 / 9) == s[(FC, "pass_rate")]
    assert fc["success_rate"] == pytest.approx(5 / 9) == s[(FC, "success_rate")]
    assert s[(FC, "db")] == pytest.approx(6 / 9)
    assert s[(FC, "communicate")] == pytest.approx(8 / 9)
    assert s[(FC, "action")] == pytest.approx(2 / 9)
    assert s[(FC, "nl_assertion")] is None  # never evaluated
    # flowstate: the infrastructure failure and the grading failure are counted, not scored
    assert (fs["tasks"], fs["episodes"], fs["grading_failed"], fs["failed"]) == (2, 6, 1, 1)
    assert fs["pass_rate"] == pytest.approx(4 / 6)
    assert s[(FS, "db")] == pytest.approx(5 / 6)
    assert s[(FS, "action")] == pytest.approx(3 / 6)


def test_scores_follow_the_benchmarks_declarations(scores_sweep: SweepBuilder) -> None:
    r = [x for x in rows("scores", scores_sweep.sweep_dir) if x["method"] == FC]
    assert [x["metric"] for x in r] == ["pass_rate", "success_rate", "db", "communicate", "nl_assertion", "action",
                                        "action_read", "action_write"]
    assert [(x["metric"], x["label"]) for x in r if x["headline"]] == [("pass_rate", "PR"), ("db", "DB"), ("action", "Act.")]
    assert {x["metric"]: x["episodes"] for x in r}["db"] == 8  # the gated episode has no value, yet counts as 0
    assert [x["metric"] for x in rows("scores", scores_sweep.sweep_dir, metric="db")] == ["db", "db"]


def test_pass_hat_k_over_three_trials(scores_sweep: SweepBuilder) -> None:
    r = by(rows("pass_hat_k", scores_sweep.sweep_dir), "method", "k")
    # full_context: (c, n) per task A (2, 3), B (0, 3), C (3, 3)
    assert r[(FC, 1)]["pass_hat_k"] == pytest.approx((2 / 3 + 0 + 1) / 3)
    assert r[(FC, 2)]["pass_hat_k"] == pytest.approx((1 / 3 + 0 + 1) / 3)  # C(2,2)/C(3,2) = 1/3
    assert r[(FC, 3)]["pass_hat_k"] == pytest.approx((0 + 0 + 1) / 3)
    # flowstate: A (3, 3), B (1, 3) — the failed trial 3 of A and the ungraded trial 3 of B are left out
    assert r[(FS, 1)]["pass_hat_k"] == pytest.approx((1 + 1 / 3) / 2)
    assert r[(FS, 2)]["pass_hat_k"] == pytest.approx(1 / 2)
    assert r[(FS, 3)]["pass_hat_k"] == pytest.approx(1 / 2)
    assert {k for (m, k) in r if m == FS} == {1, 2, 3}
    assert r[(FC, 1)]["tasks"] == 3


def test_delta_vs_the_jobs_baseline_on_common_tasks(scores_sweep: SweepBuilder) -> None:
    d = by(rows("delta_vs_baseline", scores_sweep.sweep_dir), "metric")  # the job names full_context
    assert list(d) == ["pass_rate", "db", "action", "tokens"]
    pr = d["pass_rate"]
    assert (pr["method"], pr["baseline"], pr["tasks"], pr["method_episodes"], pr["baseline_episodes"]) == (FS, FC, 2, 6, 6)
    assert pr["baseline_value"] == pytest.approx(2 / 6)  # task C (only full_context ran it) left out
    assert pr["delta_pp"] == pytest.approx(100 * (4 / 6 - 2 / 6))
    assert d["db"]["delta_pp"] == pytest.approx(100 * (5 / 6 - 3 / 6))
    assert d["action"]["delta_pp"] == pytest.approx(100 * (3 / 6 - 2 / 6))
    assert d["tokens"]["delta_pct"] == pytest.approx(100 * ((5 * 550 + 900) / 6 / 1100 - 1))
    # one unit per column: percentage points for the rates, percent for the tokens' ratio
    assert [(r["delta_pp"] is None, r["delta_pct"] is None) for r in d.values()] == [(False, True)] * 3 + [(True, False)]
    assert "delta" not in pr


def test_delta_with_another_baseline_is_bound_as_a_value(scores_sweep: SweepBuilder) -> None:
    d = by(rows("delta_vs_baseline", scores_sweep.sweep_dir, baseline=FS), "metric")
    assert (d["pass_rate"]["method"], d["pass_rate"]["baseline"]) == (FC, FS)
    assert d["pass_rate"]["delta_pp"] == pytest.approx(100 * (2 / 6 - 4 / 6))
    assert rows("delta_vs_baseline", scores_sweep.sweep_dir, baseline="x' OR '1'='1") == []


def test_tokens_and_cached_shares(scores_sweep: SweepBuilder) -> None:
    r = by(rows("tokens", scores_sweep.sweep_dir), "method")
    assert (r[FC]["episodes"], r[FC]["tokens"]) == (9, 9 * 1100)
    assert r[FC]["tokens_per_request"] == pytest.approx(9 * 1100 / 18)
    assert r[FC]["cached_share"] == pytest.approx(600 / 1000)
    assert r[FC]["cached_share_estimate"] is None
    # flowstate: 6 completed + 1 grading failure (its tokens were spent); the infrastructure failure is out
    assert (r[FS]["episodes"], r[FS]["tokens"]) == (7, 5 * 550 + 900 + 330)
    assert r[FS]["tokens_per_request"] == pytest.approx((5 * 550 + 900 + 330) / (3 + 5 + 1))
    assert r[FS]["cached_share"] is None  # nothing reported: never a misleading 0
    assert r[FS]["cached_share_estimate"] == pytest.approx(250 / 500)


def test_terminations(scores_sweep: SweepBuilder) -> None:
    r = by(rows("terminations", scores_sweep.sweep_dir), "method", "status", "termination")
    assert r[(FC, "completed", "user_stop")]["episodes"] == 7
    assert r[(FC, "completed", "user_stop")]["share"] == pytest.approx(7 / 9)
    assert r[(FC, "completed", "user_stop")]["mean_reward"] == pytest.approx(5 / 7)
    assert r[(FC, "completed", "max_steps")]["share"] == pytest.approx(1 / 9)
    assert r[(FS, "failed", "infrastructure_error")]["share"] == pytest.approx(1 / 8)
    assert r[(FS, "grading_failed", "user_stop")]["mean_reward"] is None


def test_isu_ops(scores_sweep: SweepBuilder) -> None:
    [r] = rows("isu_ops", scores_sweep.sweep_dir)
    assert (r["method"], r["steps"], r["steps_with_ops"], r["proposed"], r["accepted"], r["rejected"]) == (FS, 4, 3, 6, 3, 3)
    assert r["acceptance_rate"] == pytest.approx(0.5)
    assert r["ops_per_step"] == pytest.approx(1.5)


def test_rejections_by_reason(scores_sweep: SweepBuilder) -> None:
    r = by(rows("rejections", scores_sweep.sweep_dir), "kind", "reason", "operation")
    assert set(r) == {("isu", "id_in_use", "add"), ("isu", "not_in_active_state", "update"),
                      ("isu", "malformed", "add"), ("psa", "not_accessible", "focus")}
    assert all(r[k]["rejections"] == 1 for k in r)
    assert r[("isu", "malformed", "add")]["share"] == pytest.approx(1 / 3)
    assert r[("psa", "not_accessible", "focus")]["share"] == pytest.approx(1.0)


def test_psa_per_request(scores_sweep: SweepBuilder) -> None:
    [r] = rows("psa", scores_sweep.sweep_dir)
    # requests 1, 2, 3 of one episode: focus requested 0, 2, 1; disclosed 0, 2, 2
    assert (r["requests"], r["focus_requested"], r["focus_accepted"], r["focus_rejected"], r["disclosed"]) == (3, 3, 2, 1, 4)
    assert r["disclosed_per_request"] == pytest.approx(4 / 3)
    assert r["focus_requests_per_request"] == pytest.approx(1.0)
    assert r["steps_with_focus"] == pytest.approx(2 / 4)


def test_disclosure_distance(scores_sweep: SweepBuilder) -> None:
    r = by(rows("disclosure_distance", scores_sweep.sweep_dir), "distance")
    # request 2 disclosed two states of request 1 (distance 1, 1); request 3 one of 2 and one of 1 (1, 2)
    assert {d: v["disclosures"] for d, v in r.items()} == {1: 3, 2: 1}
    assert r[1]["share"] == pytest.approx(0.75)


def test_active_state_over_steps(scores_sweep: SweepBuilder) -> None:
    r = by(rows("active_state", scores_sweep.sweep_dir), "request", "step")
    assert {k: v["mean_active_nodes"] for k, v in r.items()} == {(1, 1): 2, (1, 2): 4, (2, 1): 3, (3, 1): 5}
    assert r[(2, 1)]["mean_index_states"] == 2


def test_parse_errors(scores_sweep: SweepBuilder) -> None:
    [r] = rows("parse_errors", scores_sweep.sweep_dir)
    assert (r["steps"], r["steps_with_errors"], r["parse_errors"], r["steps_with_warnings"], r["warnings"]) == (4, 1, 1, 1, 1)
    assert r["error_rate"] == pytest.approx(0.25)


def test_latency_percentiles_per_caller(scores_sweep: SweepBuilder) -> None:
    r = by(rows("latency", scores_sweep.sweep_dir), "caller")
    agent, user = r["agent"], r["user_simulator"]
    assert (agent["calls"], agent["served_by"]) == (4, None)
    assert agent["p50_s"] == pytest.approx(2.5)  # latencies 1, 2, 3, 4
    assert agent["p90_s"] == pytest.approx(3.7)  # 3 + 0.7 · (4 − 3)
    assert agent["max_s"] == pytest.approx(4.0)
    assert (user["calls"], user["model"], user["served_by"]) == (2, "u", "http://127.0.0.1:9000/v1")
    assert (agent["model"], user["p50_s"]) == ("m1", pytest.approx(1.0))


def build_depth_sweep(root: Path) -> SweepBuilder:
    """Per-request outcomes of a benchmark that grades each request: method X over four episodes
    (correct at depths 1..3: TTF, TFT, FT, T) and method Y with a flat curve (TT, TT)."""
    b = SweepBuilder(root, "sweep-depth", benchmark="memarena")
    curves = {"X": ["TTF", "TFT", "FT", "T"], "Y": ["TT", "TT"]}
    for method, episodes in curves.items():
        for i, marks in enumerate(episodes):
            b.episode(domain="shop", method=method, task=str(i), request_outcomes=[
                {"request": k, "correct": m == "T"} for k, m in enumerate(marks, start=1)])
    b.episode(domain="shop", method="X", task="9", status="failed", reward=None,
              request_outcomes=[{"request": 1, "correct": False}])  # excluded: infrastructure failure
    return b


def test_depth_accuracy_and_retention(tmp_path: Path) -> None:
    sweep = build_depth_sweep(tmp_path).sweep_dir
    acc = by(rows("depth_accuracy", sweep), "method", "k")
    assert acc[("X", 1)]["acc_k"] == pytest.approx(75.0)  # 3 of 4
    assert acc[("X", 2)]["acc_k"] == pytest.approx(200 / 3)  # 2 of 3
    assert (acc[("X", 3)]["acc_k"], acc[("X", 3)]["instances"]) == (pytest.approx(50.0), 2)
    r = [100, 100 * (2 / 3) / 0.75, 100 * 0.5 / 0.75]  # R_k = 100, 88.9, 66.7
    assert acc[("X", 2)]["r_k"] == pytest.approx(r[1])
    ret = by(rows("depth_retention", sweep), "method")
    # trapezoid over k = 1..3 divided by K − 1 = 2; least squares slope over 3 equally spaced points = (R3 − R1)/2
    assert ret["X"]["nauc"] == pytest.approx(((r[0] + r[1]) / 2 + (r[1] + r[2]) / 2) / 2)
    assert ret["X"]["dr"] == pytest.approx(-(r[2] - r[0]) / 2)
    assert (ret["Y"]["nauc"], ret["Y"]["dr"]) == (pytest.approx(100.0), pytest.approx(0.0))
    capped = by(rows("depth_retention", sweep, max_depth=2), "method")
    assert capped["X"]["nauc"] == pytest.approx((r[0] + r[1]) / 2)
    assert capped["X"]["dr"] == pytest.approx(r[0] - r[1])
