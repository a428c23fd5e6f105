"""The headline rows and table (pure: the shipped queries' rows in, figures as the paper prints them out)."""

from __future__ import annotations

from typing import Any

from pipeline.tracking.headline import headline_rows, headline_table

CELL = {"benchmark": "memoryarena", "domain": "travel", "model": "m"}


def _scores(method: str, sr: float, ps: float) -> list[dict[str, Any]]:
    return [{**CELL, "method": method, "metric": m, "label": m, "headline": True, "value": v}
            for m, v in (("SR", sr), ("PS", ps))] + [
        {**CELL, "method": method, "metric": "PS_task_mean", "label": "PS (task mean)", "headline": False, "value": 0.5}]


def test_memoryarena_in_two_decimals_tokens_in_four_digits_and_the_delta_per_episode() -> None:
    scores = _scores("full_context", 0.0037, 0.0309) + _scores("flowstate", 0.0074, 0.125749)
    tokens = [{**CELL, "method": "full_context", "tokens": 231_594_321}, {**CELL, "method": "flowstate", "tokens": 128_934}]
    deltas = [{**CELL, "method": "flowstate", "metric": m, "value": v, "baseline_value": b}
              for m, v, b in (("SR", 0.0074, 0.0037), ("PS", 0.125749, 0.0309), ("tokens", 1000.0, 1800.0))]
    counts = [{**CELL, "method": m, "episodes": 270} for m in ("flowstate", "full_context")]
    rows = headline_rows(scores, tokens, deltas, counts, "full_context", {"memoryarena": 2})
    assert [r.method for r in rows] == ["full_context", "flowstate"]  # the baseline first
    fc, fs = rows
    assert fc.figures == {"1 SR": 0.37, "1 SR Δ pp": 0.0, "2 PS": 3.09, "2 PS Δ pp": 0.0, "3 Tok": 231_600_000,
                          "3 Tok Δ pct": 0.0}
    assert fs.figures == {"1 SR": 0.74, "1 SR Δ pp": 0.37, "2 PS": 12.57, "2 PS Δ pp": 9.48, "3 Tok": 128_900,
                          "3 Tok Δ pct": -44.44}
    table = headline_table(rows, "full_context", {"memoryarena": 2})
    assert "**memoryarena**\n\n| Method | Domain | Model | SR (Δ) | PS (Δ) | Tok (Δ) | Episodes |" in table
    assert "| full_context (baseline) | travel | m | 0.37 | 3.09 | 231.60M | 270 |" in table
    assert "| flowstate | travel | m | 0.74 (+0.37) | 12.57 (+9.48) | 128.90K (−44.44%) | 270 |" in table


def test_without_a_baseline_no_deltas_and_a_caller_adds_columns() -> None:
    rows = headline_rows(_scores("flowstate", 0.5, 0.25), [], [], [], None, {})
    assert rows[0].figures == {"1 SR": 50.0, "2 PS": 25.0, "3 Tok": None}
    rows[0].figures["1 SR paper"] = 0.74  # e.g. the paper's published figure beside the cell's
    assert rows[0].metrics() == {"1 SR": 50.0, "2 PS": 25.0, "1 SR paper": 0.74}
    table = headline_table(rows, None, {})
    assert "| SR | PS | Tok | SR paper | Episodes |" in table and "| 50.0 | 25.0 | – | 0.7 | 0 |" in table


def test_a_label_mlflow_would_refuse_as_a_name_is_made_one() -> None:
    scores = [{**CELL, "method": "flowstate", "metric": "f1", "label": "F1 (%)", "headline": True, "value": 0.5}]
    assert list(headline_rows(scores, [], [], [], None, {})[0].figures) == ["1 F1", "2 Tok"]
