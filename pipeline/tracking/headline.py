"""The headline comparison of a sweep, as the paper prints it: per cell its benchmark's headline
metrics (τ-bench: PR, DB, Act.; MemoryArena: SR, PS, sPS) in percent, #Tok, and the Δ of each against
the job's baseline on the same model and tasks.

The same figures are the child runs' headline metrics (named ``<n> <label>`` so that they sort
first in MLflow's metric lists and columns, in the paper's column order) and the rows of the
parent run's description table. :func:`headline_rows` builds the rows from the shipped queries'
results; a caller may add columns to a row's ``figures`` (e.g. the paper's published figures)
before :func:`headline_table` prints them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from math import floor, log10
from typing import Any

from pipeline.analysis.formats import markdown_table, tokens_text

Row = Mapping[str, Any]
TOKENS = "Tok"  # the paper's #Tok ("#" is not allowed in an MLflow metric name)
TOKEN_DIGITS = 4  # significant digits of #Tok, as the paper prints it (21.03M)
DELTA_PP, DELTA_PCT = "Δ pp", "Δ pct"
_NOT_IN_A_NAME = re.compile(r"[^\w.\- :]")  # what an MLflow metric name may not hold (a label's "%", "(")


@dataclass
class HeadlineRow:
    """One cell's headline figures: column name (an MLflow metric name) -> value as printed, None
    where there is none (e.g. a Δ without baseline), in column order."""

    benchmark: str
    domain: str
    method: str
    model: str
    episodes: int
    figures: dict[str, float | None] = field(default_factory=dict)

    def metrics(self) -> dict[str, float]:
        """The figures that have a value, as MLflow metrics."""
        return {name: value for name, value in self.figures.items() if value is not None}


def _signif(value: float, digits: int) -> float:
    return value if value == 0 else round(value, digits - 1 - floor(log10(abs(value))))


def _rounded(value: float | None, decimals: int) -> float | None:
    return None if value is None else round(value, decimals)


def headline_rows(scores: Iterable[Row], tokens: Iterable[Row], deltas: Iterable[Row], counts: Iterable[Row],
                  baseline: str | None, decimals: Mapping[str, int]) -> list[HeadlineRow]:
    """The rows of the shipped queries ``scores``, ``tokens``, ``delta_vs_baseline`` and ``pass_rate``
    (``counts``) as headline rows, one per cell, the baseline first within each benchmark, domain and
    model. Percentages are rounded to the benchmark's ``decimals`` (as its paper table prints them,
    default 1); the baseline's own Δs are 0."""
    def key(r: Row) -> tuple[str, str, str, str]:
        return r["benchmark"], r["domain"], r["method"], r["model"]

    labels: dict[str, list[tuple[str, str]]] = {}  # benchmark -> [(metric, label)], headline metrics in order
    values: dict[tuple[str, str, str, str], dict[str, float | None]] = {}
    for r in scores:
        if r["headline"]:
            pairs = labels.setdefault(r["benchmark"], [])
            if (r["metric"], r["label"]) not in pairs:
                pairs.append((r["metric"], r["label"]))
            values.setdefault(key(r), {})[r["metric"]] = r["value"]
    for r in tokens:
        values.setdefault(key(r), {})[TOKENS] = r["tokens"]
    compared: dict[tuple[str, str, str, str], dict[str, tuple[float | None, float | None]]] = {}
    for r in deltas:
        compared.setdefault(key(r), {})[TOKENS if r["metric"] == "tokens" else r["metric"]] = (
            r["value"], r["baseline_value"])
    episodes = {key(r): int(r["episodes"]) for r in counts}
    rows = []
    for cell in sorted(values.keys() | episodes.keys(), key=lambda k: (k[0], k[1], k[3], k[2] != baseline, k[2])):
        benchmark, method = cell[0], cell[2]
        places = decimals.get(benchmark, 1)
        row = HeadlineRow(*cell, episodes=episodes.get(cell, 0))
        columns = [*labels.get(benchmark, []), (TOKENS, TOKENS)]
        for position, (metric, text) in enumerate(columns, start=1):
            label = " ".join(_NOT_IN_A_NAME.sub("", text).split()) or metric
            shown = values.get(cell, {}).get(metric)
            paired, base = compared.get(cell, {}).get(metric, (None, None))
            if metric == TOKENS:  # the Δ: relative change of the mean per episode on the paired tasks
                figure = None if shown is None else _signif(shown, TOKEN_DIGITS)
                delta, unit, delta_places = (100 * (paired / base - 1) if paired is not None and base else None,
                                             DELTA_PCT, 2)
            else:
                figure = None if shown is None else round(100 * shown, places)
                delta, unit, delta_places = (100 * (paired - base) if paired is not None and base is not None
                                             else None, DELTA_PP, places)
            row.figures[f"{position} {label}"] = figure
            row.figures[f"{position} {label} {unit}"] = 0.0 if method == baseline else _rounded(delta, delta_places)
        if baseline is None:
            row.figures = {k: v for k, v in row.figures.items() if not k.endswith((DELTA_PP, DELTA_PCT))}
        rows.append(row)
    return rows


def _text(column: str, value: float | None, places: int) -> str:
    """A figure as the paper prints it: 58.0, +20.0, 21.03M, −61.21%."""
    if value is None:
        return "–"
    if column.endswith(DELTA_PCT):
        return f"{value:+.2f}%".replace("-", "−")
    if column.endswith(DELTA_PP):
        return f"{value:+.{places}f}".replace("-", "−")
    if column.split(" ", 1)[1] == TOKENS:
        return tokens_text(value)
    return f"{value:.{places}f}"


def _deltas(columns: list[str]) -> dict[str, str]:
    """Each figure's Δ column, where it has one."""
    return {c: d for c in columns for d in (f"{c} {DELTA_PP}", f"{c} {DELTA_PCT}") if d in columns}


def _cell(row: HeadlineRow, column: str, delta: str | None, places: int, is_baseline: bool) -> str:
    """A figure with its Δ in brackets (the baseline's Δ is 0 by definition: left out)."""
    text = _text(column, row.figures.get(column), places)
    if delta is None or is_baseline or row.figures.get(delta) is None:
        return text
    return f"{text} ({_text(delta, row.figures[delta], places)})"


def headline_table(rows: list[HeadlineRow], baseline: str | None, decimals: Mapping[str, int]) -> str:
    """The rows as markdown, a table per benchmark (their columns differ): method, domain, model, every
    figure with its Δ in brackets (headers: the metric names less their position), episodes. A
    column a caller adds to the rows' figures is a column of its own."""
    parts = []
    for benchmark in sorted({r.benchmark for r in rows}):
        mine = [r for r in rows if r.benchmark == benchmark]
        columns = list(dict.fromkeys(name for r in mine for name in r.figures))
        deltas = _deltas(columns)
        shown = [c for c in columns if c not in deltas.values()]
        places = decimals.get(benchmark, 1)
        header = ["Method", "Domain", "Model", *(c.split(" ", 1)[1] + (" (Δ)" if c in deltas else "") for c in shown),
                  "Episodes"]
        body = [[f"{r.method} (baseline)" if r.method == baseline else r.method, r.domain, r.model,
                 *(_cell(r, c, deltas.get(c), places, r.method == baseline) for c in shown), str(r.episodes)]
                for r in mine]
        parts.append(f"**{benchmark}**\n\n{markdown_table(header, body)}")
    caption = ("Headline metrics as the paper prints them: each benchmark's headline metrics in percent; "
               f"{TOKENS} = the paper's #Tok (prompt + completion tokens of the cell's episodes, "
               f"{TOKEN_DIGITS} significant digits)")
    if baseline is not None:
        caption += (f"; (Δ) against **{baseline}** on the same model and tasks: percentage points, for {TOKENS} "
                    "the relative change per episode (negative = savings)")
    return "\n\n".join(parts) + f"\n\n{caption}. Each row is a child run; its metrics carry the columns' names."
