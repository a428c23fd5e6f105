"""The report's figures (matplotlib, Agg canvas: no display, no global backend switch)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from matplotlib import rcParams
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from pipeline.core.atomic import write_atomic


def _save(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    write_atomic(path, lambda tmp: fig.savefig(tmp, format="png", dpi=150, bbox_inches="tight"))
    return path


# Rates are percentages, drawn over their whole range as the paper draws them (not autoscaled: all
# results at 0 once gave an axis of -0.04 to 0.04); the margin keeps a point at 0 or 100 whole.
PERCENT_LIMITS = (-5.0, 105.0)
PERCENT_TICKS = range(0, 101, 20)
# One per method of Figure 3 (a sweep with more methods repeats them, told apart by their labels).
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")


def performance_vs_tokens(points: list[dict[str, Any]], baseline: str, path: Path, *,
                          ylabel: str = "pass rate (%)", measure: str = "#Tok") -> Path:
    """Figure 3, written to ``path``: see :func:`figure3`."""
    return _save(figure3(points, baseline, ylabel=ylabel, measure=measure), path)


def figure3(points: list[dict[str, Any]], baseline: str, *, ylabel: str = "pass rate (%)",
            measure: str = "#Tok") -> Figure:
    """Figure 3: performance against relative #Tok per method and model.

    ``points``: model, method, relative_tokens (#Tok / the baseline's, same model and tasks, averaged
    over domains), performance (percent, averaged over domains). A colour per model, a marker per
    method; the baseline is hollow at x = 1; dashed arrows lead from it to each other method of the
    same model. Each point is labelled with its method, unless two labels would overlap (many
    methods, close results): then a legend outside the axes names the methods' markers instead.
    """
    fig = Figure(figsize=(6, 4.5), layout="constrained")
    ax = fig.add_subplot()
    by_model: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in points:
        by_model[p["model"]].append(p)
    colors = rcParams["axes.prop_cycle"].by_key()["color"]
    methods = sorted({p["method"] for p in points}, key=lambda m: (m != baseline, m))
    marker = {m: MARKERS[i % len(MARKERS)] for i, m in enumerate(methods)}
    labels = []
    for i, model in enumerate(sorted(by_model)):
        color = colors[i % len(colors)]
        base = next((p for p in by_model[model] if p["method"] == baseline), None)
        for p in by_model[model]:
            hollow = p["method"] == baseline
            ax.scatter(p["relative_tokens"], p["performance"], s=60, color=color, marker=marker[p["method"]],
                       facecolors="none" if hollow else color, zorder=3)
            labels.append(ax.annotate(p["method"], (p["relative_tokens"], p["performance"]), textcoords="offset points",
                                      xytext=(5, 5), fontsize=8))
            if base is not None and not hollow:
                ax.annotate("", xy=(p["relative_tokens"], p["performance"]),
                            xytext=(base["relative_tokens"], base["performance"]),
                            arrowprops={"arrowstyle": "->", "linestyle": "--", "color": color})
    ax.set_xlabel(f"relative token usage ({measure} / {baseline}, same model and tasks)")
    ax.set_ylabel(ylabel)
    ax.set_ylim(*PERCENT_LIMITS)
    ax.set_yticks(PERCENT_TICKS)
    ax.grid(alpha=0.3)
    models = [Line2D([], [], color=colors[i % len(colors)], marker="o", linestyle="", label=model)
              for i, model in enumerate(sorted(by_model))]
    # Legends outside the axes, where they cover no point: the models below, the methods on the right.
    fig.legend(handles=models, title="model", fontsize=8, loc="outside lower center", ncols=min(len(models), 4))
    if _overlapping(fig, labels):
        for label in labels:
            label.remove()
        fig.legend(handles=[Line2D([], [], color="0.3", marker=marker[m], linestyle="", label=m) for m in methods],
                   title="method", fontsize=8, loc="outside right upper")
    return fig


def _overlapping(fig: Figure, texts: list[Any]) -> bool:
    """Whether any two of ``texts`` overlap as drawn (the renderer's extents, once the layout has
    placed the axes)."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in texts]
    return any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def accuracy_by_depth(rows: list[dict[str, Any]], path: Path) -> Path:
    """Figure 4, written to ``path``: see :func:`figure4`."""
    return _save(figure4(rows), path)


def figure4(rows: list[dict[str, Any]]) -> Figure:
    """Figure 4: Acc_k against depth k, one panel per benchmark/domain, one line per method and model,
    each line's colour the same in every panel; one legend, outside the panels (inside, it covered
    the lines)."""
    panels: dict[str, dict[str, list[tuple[int, float]]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        panels[f"{r['benchmark']} / {r['domain']}"][f"{r['method']} ({r['model']})"].append((r["k"], r["acc_k"]))
    colors = rcParams["axes.prop_cycle"].by_key()["color"]
    names = sorted({label for lines in panels.values() for label in lines})
    color = {label: colors[i % len(colors)] for i, label in enumerate(names)}
    fig = Figure(figsize=(4.5 * len(panels) + 2.5, 3.8), layout="constrained")
    handles: dict[str, Any] = {}
    for i, (title, lines) in enumerate(sorted(panels.items()), start=1):
        ax = fig.add_subplot(1, len(panels), i)
        for label, curve in sorted(lines.items()):
            ks, acc = zip(*sorted(curve), strict=True)
            [handles[label]] = ax.plot(ks, acc, marker="o", label=label, color=color[label])
        ax.set_title(title)
        ax.set_xlabel("request depth k")
        ax.set_ylabel("Acc_k (%)")
        ax.set_ylim(*PERCENT_LIMITS)
        ax.set_yticks(PERCENT_TICKS)
        ax.xaxis.set_major_locator(MaxNLocator(nbins="auto", steps=[1, 2, 2.5, 5, 10], integer=True))  # AutoLocator's
        ax.grid(alpha=0.3)
    fig.legend([handles[n] for n in names], names, loc="outside right upper", fontsize=7)
    return fig
