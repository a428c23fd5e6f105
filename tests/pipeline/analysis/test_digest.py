"""What a comparison of two sweeps' results leaves out: timings and prefix-cache figures always,
the record of failed calls when asked (a sweep that lost a replica mid-call)."""

from __future__ import annotations

from pipeline.tracking.digest import SweepDigest, compare, incidental, without_faults


def digest(faults: int = 0, **metrics: float) -> SweepDigest:
    return SweepDigest(
        episodes={"e1": ("completed", 1.0), "e2": ("completed", 0.0)},
        rows={"episodes": {"e1": 1, "e2": 1}, "steps": {"e1": 5, "e2": 7}, "faults": {"e1": faults} if faults else {}},
        metrics={"cell": {"pass_rate": 0.5, "tokens.prompt_tokens": 900.0, **metrics}},
        parents=1, children={"cell": 1}, statuses=["FINISHED", "FINISHED"])


def test_cache_figures_and_timings_are_incidental_token_counts_are_not() -> None:
    assert all(incidental(m) for m in ("tokens.cached_share", "tokens.reusable_prefix_tokens",
                                       "tokens.physical_limit_tokens", "latency.p50_s", "live.done"))
    assert not any(incidental(m) for m in ("tokens.prompt_tokens", "tokens.tokens", "pass_rate", "faults.total"))


def test_a_sweep_whose_calls_failed_and_were_retried_equals_the_reference_less_its_faults() -> None:
    reference, retried = digest(), digest(faults=2, **{"faults.total": 2.0, "faults.connection": 2.0})
    plain = compare(reference, retried)
    assert plain.duplicated == 2 and plain.differences  # the failed calls' rows and counts
    assert compare(without_faults(reference), without_faults(retried)).same


def test_without_faults_still_sees_a_changed_result() -> None:
    changed = digest(faults=1, **{"faults.total": 1.0})
    changed.episodes["e2"] = ("completed", 1.0)
    assert not compare(without_faults(digest()), without_faults(changed)).same
