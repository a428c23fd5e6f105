"""The report: the paper's table layouts, paired bootstrap intervals, figures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipeline.analysis.report import build_report
from pipeline.analysis.stats import paired_bootstrap
from tests.pipeline.analysis.builder import SweepBuilder
from tests.pipeline.analysis.test_metrics import build_depth_sweep


def test_report_tables_and_figures(scores_sweep: SweepBuilder, tmp_path: Path) -> None:
    build_depth_sweep(scores_sweep.root)
    # a second FlowState variant on the same tasks makes an ablation table
    for task, trial, reward in (("A", 0, 1.0), ("B", 0, 0.0)):
        scores_sweep.episode(method="flowstate-no-psa", task=task, trial=trial, reward=reward, db=reward, graded=True,
                             agent_prompt_tokens=2000, agent_completion_tokens=200)
    report = build_report(scores_sweep.root, tmp_path / "out" / "report.md")
    text = report.markdown.read_text()
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("| Model | Method | Airline PR"))
    assert header == "| Model | Method | Airline PR | Airline DB | Airline Act. | Airline #Tok |"
    assert "| m1 | full_context | 55.6 | 66.7 | 22.2 | 9.90K |" in lines  # 5/9, 6/9, 2/9, 9 × 1100
    assert "| m1 | flowstate | 66.7 | 83.3 | 50.0 | 3.98K |" in lines
    delta = next(line for line in lines if line.startswith("| m1 | Δ flowstate vs. full_context"))
    assert delta == "| m1 | Δ flowstate vs. full_context | +33.3 | +33.3 | +16.7 | −44.70% |"
    # Table 3 lists both variants; Table 4 the depth retention of memarena/shop
    assert "## Table 3: variants" in text and "| taubench | airline | m1 | flowstate-no-psa | 50.0 |" in text
    table4 = text[text.index("## Table 4"):]
    assert "| Model | Method | shop nAUC ↑ | shop DR ↓ |" in table4
    assert "| m1 | Y | 100 | 0 |" in table4
    # paired intervals: flowstate − full_context over the six (task, trial) pairs both ran
    pair_line = next(line for line in lines if line.startswith("| taubench | airline | m1 | flowstate |"))
    assert pair_line.endswith("| 6 | +33.3 | needs ≥ 10 pairs |")  # too few for an interval: said, not [+0, +0]
    assert "none over fewer than 10 pairs" in text
    assert "10,000 bootstrap resamples" in text
    assert [f.name for f in report.figures] == ["report_fig3_tokens.png", "report_fig3_uncached.png",
                                                "report_fig4_depth.png"]
    # the cost table: no server reported cached tokens, so every prompt token is uncached; no cost model
    cost = text[text.index("## Cost"):text.index("## FlowState internals")]
    assert "| taubench | airline | m1 | flowstate-no-psa | 4.40K | 4.00K | 400 | – |" in cost  # 2 × (2000 + 200)
    assert "No cost model: state one under `analysis:" in cost
    for figure in report.figures:
        assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"]({figure.name})" in text


def test_paired_bootstrap_matches_the_normal_approximation() -> None:
    differences = np.tile([-1.0, 1.0], 500)  # mean 0, standard deviation 1, n = 1000
    ci = paired_bootstrap(differences)
    half_width = 1.96 / np.sqrt(1000)
    assert ci.n == 1000 and ci.mean == 0.0
    assert ci.low == pytest.approx(-half_width, abs=0.01)
    assert ci.high == pytest.approx(half_width, abs=0.01)
    assert paired_bootstrap(differences) == ci  # fixed seed: the same interval every time
    constant = paired_bootstrap([50.0] * 10)
    assert (constant.low, constant.mean, constant.high) == (50.0, 50.0, 50.0)


def test_too_few_pairs_get_a_mean_and_no_interval() -> None:
    """One pair once read [+0.0, +0.0]: an interval that looks exact and says nothing."""
    assert paired_bootstrap([0.0]).model_dump() == {"n": 1, "mean": 0.0, "low": None, "high": None}
    assert paired_bootstrap([1.0, 0.0] * 4 + [1.0]).low is None  # 9 pairs
    assert paired_bootstrap([1.0, 0.0] * 5).low is not None  # MIN_PAIRS


def test_the_baseline_is_found_under_its_protocol_label(tmp_path: Path) -> None:
    """A job that ran Full Context only on the JSON protocol labels it ``full_context-json``."""
    b = SweepBuilder(tmp_path / "runs")
    for method, reward, tokens in (("full_context-json", 0.0, 1000), ("flowstate-json", 1.0, 600)):
        b.episode(method=method, task="A", reward=reward, db=reward, graded=True, agent_prompt_tokens=tokens,
                  agent_completion_tokens=0)
    b.manifest()  # its job names full_context as the baseline
    text = build_report(b.root, tmp_path / "report.md").markdown.read_text()
    assert "baseline: `full_context-json`" in text
    assert "| m1 | Δ flowstate-json vs. full_context-json | +100.0 | +100.0 | – | −40.00% |" in text.splitlines()
