"""The report's figures as drawn: rate axes over their whole range, labels that do not overlap, legends
beside the lines, measured with the renderer's extents (the PNGs: /work/screens-30/plots/)."""

from __future__ import annotations

from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from pipeline.analysis.plots import PERCENT_LIMITS, figure3, figure4

METHODS = ["full_context", "flowstate", "flowstate-json", "flowstate-no-psa", "flowstate-no-isu", "bm25",
           "reasoningbank", "mem0", "last_n", "summary"]


def drawn(fig: Figure) -> Any:
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def labels(fig: Figure) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts if t.get_text()]


def point(method: str, relative_tokens: float, performance: float, model: str = "m1") -> dict[str, Any]:
    return {"model": model, "method": method, "relative_tokens": relative_tokens, "performance": performance}


def assert_apart(fig: Figure) -> None:
    """No two texts of the axes overlap, and no legend overlaps an axes."""
    renderer = drawn(fig)
    texts = [t.get_window_extent(renderer) for ax in fig.axes for t in ax.texts if t.get_text()]
    assert not any(a.overlaps(b) for i, a in enumerate(texts) for b in texts[i + 1:])
    for legend in fig.legends:
        assert not any(legend.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer)) for ax in fig.axes)


def test_a_rate_axis_shows_0_to_100_when_every_result_is_0() -> None:
    """It once read -0.04 … 0.04."""
    fig3 = figure3([point(m, 1 + i / 10, 0.0) for i, m in enumerate(METHODS[:3])], "full_context")
    depth = [{"benchmark": "b", "domain": "d", "method": "x", "model": "m1", "k": k, "acc_k": 0.0} for k in (1, 2)]
    for fig in (fig3, figure4(depth)):
        drawn(fig)
        ax = fig.axes[0]
        assert ax.get_ylim() == PERCENT_LIMITS
        assert [t.get_text() for t in ax.get_yticklabels()] == ["0", "20", "40", "60", "80", "100"]


def test_figure3_labels_points_that_have_room_and_names_markers_where_they_have_not() -> None:
    apart = figure3([point("full_context", 1.0, 40.0), point("flowstate", 0.5, 60.0), point("bm25", 0.8, 20.0)],
                    "full_context")
    assert sorted(labels(apart)) == ["bm25", "flowstate", "full_context"] and len(apart.legends) == 1  # models
    assert_apart(apart)
    crowded = figure3([point(m, 1.0 if i == 0 else 0.5 + 0.02 * i, 40.0 + i % 3, model)
                       for model in ("m1", "m2") for i, m in enumerate(METHODS)], "full_context")
    assert labels(crowded) == []  # ten methods, close together: their labels overlapped
    [method_legend] = [legend for legend in crowded.legends if legend.get_title().get_text() == "method"]
    assert [t.get_text() for t in method_legend.get_texts()] == ["full_context", *sorted(METHODS[1:])]
    assert_apart(crowded)


def test_figure4s_legend_is_outside_the_panels_one_colour_per_line_in_all() -> None:
    rows = [{"benchmark": "memoryarena", "domain": domain, "method": method, "model": "m1", "k": k,
             "acc_k": 98.0 - k * i} for domain in ("shop", "travel") for i, method in enumerate(METHODS[:5])
            for k in range(1, 9)]
    fig = figure4(rows)
    assert_apart(fig)
    [legend] = fig.legends
    assert len(legend.get_texts()) == 5
    colours = [{line.get_label(): line.get_color() for line in ax.get_lines()} for ax in fig.axes]
    assert colours[0] == colours[1]
