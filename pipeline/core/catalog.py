"""What readers of results need from a benchmark: its metrics and its report's layout, as data.

A benchmark's catalog is stored in a sweep's manifest when it runs, so that reading results never
imports a plug-in (results are data); :data:`CATALOGS` holds the installed benchmarks' catalogs, for
sweeps whose manifests hold none (registered with the benchmark, found like any plug-in).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from flowstate.registry import Registry

Aggregate = Literal["mean", "gated_mean", "ratio"]


class MetricSpec(BaseModel):
    """One score a benchmark writes per episode (a key of the episodes' ``metrics`` map) and how a
    cell's value is aggregated from the episodes' values.

    - ``mean``: mean over scored episodes that have the value;
    - ``gated_mean``: the same, but an episode whose grading gate failed (``graded = false``) counts
      as 0 (NULL when no episode of the cell has the value);
    - ``ratio``: sum of ``numerator`` over sum of ``denominator`` (both metric keys), a micro-average.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    label: str
    description: str
    aggregate: Aggregate = "mean"
    # Where an episode's value comes from: the episodes column ``reward`` or ``success``, else the
    # ``metrics`` map under ``key`` (default: the name).
    column: Literal["reward", "success"] | None = None
    key: str | None = None
    numerator: str | None = None
    denominator: str | None = None
    # A column of the benchmark's main results table, with Δ rows against the baseline.
    headline: bool = False


class BenchmarkCatalog(BaseModel):
    """What readers of results need from a benchmark: its metrics, its main table's heading and
    caption, and its domains' column labels and depth panels. Stored in a sweep's manifest when it
    runs, so that reading results never imports a plug-in (results are data)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    metrics: tuple[MetricSpec, ...] = ()
    report_heading: str = "Results"
    report_caption: str = ""
    # Decimals of the percentages in the paper's main table (τ-bench 58.0, MemoryArena 21.11): the
    # headline metrics in MLflow are rounded to them.
    percent_decimals: int = 1
    domain_labels: dict[str, str] = {}
    depth_panels: dict[str, str] = {}

    def domain_label(self, domain: str) -> str:
        return self.domain_labels.get(domain, domain.capitalize())


CATALOGS: Registry[BenchmarkCatalog] = Registry("benchmark catalog")
