"""The paper's published figures (Tables 1–5), as data beside a sweep's own results.

``paper_figures.yaml`` (shipped with the package) holds every number of the paper's Tables 1–5 in
this project's names: benchmark, domain, method (as a job file names it), metric (as the scores
query names it, ``tokens`` for #Tok, ``nauc`` and ``dr`` for Table 4), the paper's base model as the
paper labels it, the value exactly as printed and its unit. A test checks each against the paper's
text. The report's section "The paper beside this sweep" (also the MLflow parent's description) reads
it; a cell the paper has no figure for gets none.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from pipeline.analysis.formats import markdown_table

FIGURES_FILE = Path(__file__).with_name("paper_figures.yaml")
Unit = Literal["%", "pp", "% change", "M tokens", "pp/subtask"]
Key = tuple[str, str, str, str]  # benchmark, domain, model, method label: the report's cell key


class PaperFigure(BaseModel):
    """One number of the paper's tables."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    table: int = Field(ge=1, le=5)
    model: str  # the paper's base model, as the paper labels it
    benchmark: str
    domain: str
    method: str
    versus: str | None = None  # a Δ row: the method it compares with, on the same model
    metric: str
    value: str = Field(pattern=r"^[+-]?\d+\.\d+M?%?$")  # exactly as printed
    unit: Unit

    @property
    def number(self) -> float:
        """The value in its unit (52.65 for "52.65M" of unit "M tokens")."""
        return float(self.value.rstrip("%M"))

    @property
    def text(self) -> str:
        """As the report prints its own numbers: #Tok with its "M", a minus sign as "−"."""
        suffix = "M" if self.unit == "M tokens" and not self.value.endswith("M") else ""
        return (self.value + suffix).replace("-", "−")


class PaperFigures(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    figures: tuple[PaperFigure, ...]

    def cell(self, benchmark: str, domain: str, method: str, metric: str, *,
             versus: str | None = None) -> dict[str, PaperFigure]:
        """The paper's figure per paper model for one cell and metric (a Δ against ``versus`` where
        given); where two tables print the same figure (Table 5 repeats Table 1), the first table's."""
        found: dict[str, PaperFigure] = {}
        for f in self.figures:
            if (f.benchmark, f.domain, f.method, f.metric, f.versus) == (benchmark, domain, method, metric, versus):
                found.setdefault(f.model, f)
        return found

    @property
    def models(self) -> list[str]:
        """The paper's base models, in the order the data first names them."""
        return list(dict.fromkeys(f.model for f in self.figures))

    @property
    def methods(self) -> set[str]:
        return {f.method for f in self.figures}


@cache
def paper_figures(path: Path = FIGURES_FILE) -> PaperFigures:
    return PaperFigures.model_validate(yaml.safe_load(path.read_text()))


def paper_method(label: str, name: str | None = None) -> str | None:
    """The paper's method a cell stands for: its method's ``name`` where known (the episodes'
    method options hold it), else its label, else the method its label's family names
    (``flowstate-json`` is FlowState on another protocol, as the report's baseline resolution reads
    it); None for a method the paper did not run."""
    methods = paper_figures().methods
    for candidate in (name,) if name is not None else (label, label.split("-", 1)[0]):
        if candidate in methods:
            return candidate
    return None


def beside_paper(values: Mapping[Key, Mapping[str, str]], labels: Mapping[str, str],
                 deltas: Mapping[Key, Mapping[str, str]], baseline: str | None,
                 names: Mapping[str, str | None]) -> str | None:
    """The report's section: per benchmark, a row per cell and metric the paper has a figure for,
    the sweep's own value beside the paper's, one column per paper model (blank where that model has
    none). ``values``: the sweep's text per cell and metric; ``labels``: the metrics to show, in
    order, and their column labels; ``deltas``: the sweep's Δ against ``baseline`` (a method label);
    ``names``: each method label's method name, where known."""
    data = paper_figures()
    versus = paper_method(baseline, names.get(baseline)) if baseline else None
    parts = []
    for benchmark in sorted({key[0] for key in values}):
        rows: list[tuple[list[str], dict[str, PaperFigure]]] = []
        for key in sorted((k for k in values if k[0] == benchmark), key=lambda k: (*k[:3], k[3] != baseline, k[3])):
            _, domain, model, label = key
            method = paper_method(label, names.get(label))
            if method is None:
                continue
            for metric, name in labels.items():
                paper = data.cell(benchmark, domain, method, metric)
                if paper:
                    rows.append(([domain, model, label, name, values[key].get(metric, "–")], paper))
                paper = data.cell(benchmark, domain, method, metric, versus=versus) if versus else {}
                if paper and method != versus:
                    rows.append(([domain, model, label, f"Δ {name} vs. {baseline}",
                                  deltas.get(key, {}).get(metric, "–")], paper))
        if not rows:
            continue
        models = [m for m in data.models if any(m in paper for _, paper in rows)]
        body = [own + [paper[m].text if m in paper else "" for m in models] for own, paper in rows]
        parts.append(f"### {benchmark}\n\n" + markdown_table(
            ["Domain", "Model", "Method", "Metric", "this sweep", *(f"paper, {m}" for m in models)], body))
    return "\n".join(parts) or None
