"""The report's figures (matplotlib, Agg canvas: no display, no global backend switch)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from matplotlib import rcParams
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from pipeline.core.atomic import write_atomic


def _save(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    write_atomic(path, lambda tmp: fig.savefig(tmp, format="png", dpi=150, bbox_inches="tight"))
    return path


def performance_vs_tokens(points: list[dict[str, Any]], baseline: str, path: Path, *,
                          ylabel: str = "pass rate (%)", measure: str = "#Tok") -> Path:
    """Figure 3: performance against relative #Tok per method and model.

    ``points``: model, method, relative_tokens (#Tok / the baseline's, same model and tasks, averaged
    over domains), performance (percent, averaged over domains). The baseline is hollow at x = 1;
    dashed arrows lead from it to each other method of the same model.
    """
    fig = Figure(figsize=(6, 4.5))
    ax = fig.add_subplot()
    by_model: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in points:
        by_model[p["model"]].append(p)
    colors = rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (model, group) in enumerate(sorted(by_model.items())):
        color = colors[i % len(colors)]
        base = next((p for p in group if p["method"] == baseline), None)
        for p in group:
            hollow = p["method"] == baseline
            ax.scatter(p["relative_tokens"], p["performance"], s=60, color=color,
                       facecolors="none" if hollow else color, zorder=3)
            ax.annotate(p["method"], (p["relative_tokens"], p["performance"]), textcoords="offset points",
                        xytext=(5, 5), fontsize=8)
            if base is not None and not hollow:
                ax.annotate("", xy=(p["relative_tokens"], p["performance"]),
                            xytext=(base["relative_tokens"], base["performance"]),
                            arrowprops={"arrowstyle": "->", "linestyle": "--", "color": color})
        ax.scatter([], [], color=color, label=model)
    ax.set_xlabel(f"relative token usage ({measure} / {baseline}, same model and tasks)")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(title="model", fontsize=8)
    return _save(fig, path)


def accuracy_by_depth(rows: list[dict[str, Any]], path: Path) -> Path:
    """Figure 4: Acc_k against depth k, one panel per benchmark/domain, one line per method and model."""
    panels: dict[str, dict[str, list[tuple[int, float]]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        panels[f"{r['benchmark']} / {r['domain']}"][f"{r['method']} ({r['model']})"].append((r["k"], r["acc_k"]))
    fig = Figure(figsize=(4.5 * len(panels), 3.8))
    for i, (title, lines) in enumerate(sorted(panels.items()), start=1):
        ax = fig.add_subplot(1, len(panels), i)
        for label, curve in sorted(lines.items()):
            ks, acc = zip(*sorted(curve), strict=True)
            ax.plot(ks, acc, marker="o", label=label)
        ax.set_title(title)
        ax.set_xlabel("request depth k")
        ax.set_ylabel("Acc_k (%)")
        ax.set_ylim(0, 105)
        ax.xaxis.set_major_locator(MaxNLocator(nbins="auto", steps=[1, 2, 2.5, 5, 10], integer=True))  # AutoLocator's
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return _save(fig, path)
