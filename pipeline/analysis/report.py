"""A markdown report in the layout of the paper's tables, with paired bootstrap intervals and the
figures (3: performance against relative tokens; 4: accuracy by request depth).

Each benchmark's main table has the columns it declares as headline metrics (τ-bench's Table 2:
PR / DB / Act.; MemoryArena's Table 1: SR / PS / sPS) plus #Tok, per domain; Δ rows and the paired
intervals compare every method with the job's baseline (``analysis: {baseline: ...}``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
from pydantic import BaseModel

from flowstate.errors import FlowStateError
from pipeline.analysis import plots
from pipeline.analysis.formats import cell_text, markdown_table, tokens_text
from pipeline.analysis.paper_figures import beside_paper
from pipeline.analysis.query import connect, job_baseline, query_rows, resolve_baseline, sweep_catalogs
from pipeline.analysis.stats import LEVEL, MIN_PAIRS, RESAMPLES, SEED, paired_bootstrap
from pipeline.core.atomic import write_text_atomic
from pipeline.core.catalog import BenchmarkCatalog
from pipeline.core.cost import CostModel, cost_models, with_gpu_seconds
from pipeline.store.files import broken_files, sweep_dirs
from pipeline.store.manifest import read_manifest

Row = dict[str, Any]
Key = tuple[str, str, str, str]
TOKENS = "tokens"
COUNTED = "†"  # marks a #Tok a tokenizer counted
PAPER_CAPTION = (
    "The paper's published figures (Tables 1–5; `pipeline/analysis/paper_figures.yaml`) beside this sweep's, per "
    "cell and metric the paper has a figure for, one column per base model of the paper (blank: none from that "
    "model). Performance in percent, Δ in percentage points (#Tok: relative change), #Tok in tokens summed over "
    "the episodes; this sweep's models, tasks and settings may differ from the paper's.\n")


class Report(BaseModel):
    markdown: Path
    figures: list[Path]


class ReportError(FlowStateError, ValueError):
    """A report that cannot be made as asked (e.g. sweeps that name different baselines)."""


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def _signed(x: float | None, suffix: str = "") -> str:
    return "–" if x is None else f"{x:+.{2 if suffix else 1}f}{suffix}".replace("-", "−")


def _key(r: Row) -> Key:
    return r["benchmark"], r["domain"], r["model"], r["method"]


def _method_order(methods: Iterable[str], baseline: str | None) -> list[str]:
    return sorted(set(methods), key=lambda m: (m != baseline, m))


class Scores:
    """The shipped queries' rows, indexed for the tables: metric values and Δs per cell."""

    def __init__(self, scores: list[Row], tokens: list[Row], deltas: list[Row]) -> None:
        self.value: dict[Key, dict[str, float | None]] = defaultdict(dict)
        self.headline: dict[str, list[tuple[str, str]]] = {}  # benchmark -> [(metric, label)] in order
        for r in scores:
            self.value[_key(r)][r["metric"]] = r["value"]
            if r["headline"]:
                pairs = self.headline.setdefault(r["benchmark"], [])
                if (r["metric"], r["label"]) not in pairs:
                    pairs.append((r["metric"], r["label"]))
        self.counted: set[Key] = set()  # cells whose #Tok a tokenizer counted (no server reported it)
        for r in tokens:
            self.value[_key(r)][TOKENS] = r["tokens"]
            if r.get("tokens_counted"):
                self.counted.add(_key(r))
        self.delta: dict[Key, dict[str, float | None]] = defaultdict(dict)
        for r in deltas:
            self.delta[_key(r)][r["metric"]] = r["delta_pct" if r["metric"] == TOKENS else "delta_pp"]
        self.rows = scores

    def cells(self, benchmark: str) -> list[Key]:
        return sorted({_key(r) for r in self.rows if r["benchmark"] == benchmark})

    def columns(self, benchmark: str) -> list[tuple[str, str]]:
        """(metric, label) of the benchmark's main table: its headline metrics, then #Tok."""
        return [*self.headline.get(benchmark, []), (TOKENS, "#Tok")]

    def text(self, key: Key, metric: str) -> str:
        value = self.value.get(key, {}).get(metric)
        if metric != TOKENS:
            return _pct(value)
        return tokens_text(value) + (COUNTED if key in self.counted and value is not None else "")

    def delta_text(self, key: Key, metric: str) -> str:
        return _signed(self.delta.get(key, {}).get(metric), "%" if metric == TOKENS else "")


def main_table(s: Scores, benchmark: str, baseline: str | None, catalog: BenchmarkCatalog | None = None) -> str:
    """One benchmark's main table: per domain its headline metrics and #Tok; Δ rows against the baseline."""
    cells = s.cells(benchmark)
    domains = sorted({d for _, d, _, _ in cells})
    columns = s.columns(benchmark)
    name = catalog.domain_label if catalog else str.capitalize
    header = ["Model", "Method"] + [f"{name(d)} {label}" for d in domains for _, label in columns]
    body = []
    for model in sorted({m for _, _, m, _ in cells}):
        methods = _method_order((method for _, _, m, method in cells if m == model), baseline)
        for method in methods:
            body.append([model, method] + [s.text((benchmark, d, model, method), metric)
                                           for d in domains for metric, _ in columns])
        for method in methods:
            if not any((benchmark, d, model, method) in s.delta for d in domains):
                continue
            body.append([model, f"Δ {method} vs. {baseline}"] + [s.delta_text((benchmark, d, model, method), metric)
                                                                 for d in domains for metric, _ in columns])
    note = (f"\n\n{COUNTED} counted with the job's tokenizer (`analysis.count_tokens`): no server served these calls."
            if any(key in s.counted for key in cells) else "")
    return f"### {benchmark}\n\n{markdown_table(header, body)}{note}"


def paired_table(pairs: list[Row]) -> str:
    groups: dict[Key, list[float]] = defaultdict(list)
    for p in pairs:
        if p["reward"] is not None and p["baseline_reward"] is not None:
            groups[_key(p)].append(100 * (p["reward"] - p["baseline_reward"]))
    body = []
    for (benchmark, domain, model, method), diffs in sorted(groups.items()):
        ci = paired_bootstrap(diffs)
        interval = (f"needs ≥ {MIN_PAIRS} pairs" if ci.low is None or ci.high is None
                    else f"[{_signed(ci.low)}, {_signed(ci.high)}]")
        body.append([benchmark, domain, model, method, str(ci.n), _signed(ci.mean), interval])
    return markdown_table(["Benchmark", "Domain", "Model", "Method", "Pairs", "Δreward (pp)", f"{LEVEL:.0%} CI"], body)


def ablation_table(s: Scores, baseline: str | None) -> str | None:
    """Table 3: every variant (method other than the baseline) where a domain has two or more, in the
    benchmark's headline metrics."""
    parts = []
    for benchmark in sorted(s.headline):
        groups: dict[tuple[str, str], list[str]] = defaultdict(list)
        for _, domain, model, method in s.cells(benchmark):
            if method != baseline:
                groups[(domain, model)].append(method)
        columns = s.columns(benchmark)
        body = [[benchmark, domain, model, method] + [s.text((benchmark, domain, model, method), m) for m, _ in columns]
                for (domain, model), methods in sorted(groups.items()) if len(methods) >= 2 for method in sorted(methods)]
        if body:
            parts.append(markdown_table(["Benchmark", "Domain", "Model", "Variant"] + [label for _, label in columns], body))
    return "\n".join(parts) or None


def retention_table(retention: list[Row]) -> str | None:
    """Table 4: nAUC and DR per method, one column pair per benchmark/domain."""
    if not retention:
        return None
    panels = sorted({(r["benchmark"], r["domain"]) for r in retention})
    by = {(r["benchmark"], r["domain"], r["model"], r["method"]): r for r in retention}
    header = ["Model", "Method"] + [f"{d} {m}" for _, d in panels for m in ("nAUC ↑", "DR ↓")]
    body = []
    for model, method in sorted({(r["model"], r["method"]) for r in retention}):
        cells = []
        for b, d in panels:
            r = by.get((b, d, model, method), {})
            cells += [cell_text(r.get("nauc"), 2) or "–", cell_text(r.get("dr"), 2) or "–"]
        body.append([model, method] + cells)
    return markdown_table(header, body)


def paper_table(con: duckdb.DuckDBPyConnection, s: Scores, retention: list[Row], baseline: str | None) -> str | None:
    """The paper's figures (Tables 1–5) beside the sweep's own: the main tables' metrics, their Δs
    against the baseline and Table 4's nAUC and DR, per cell the paper has a figure for."""
    names = dict(con.sql("SELECT method, any_value(json_extract_string(method_options_json, '$.name')) "
                         "FROM episodes GROUP BY method").fetchall())
    labels = {metric: label for b in sorted(s.headline) for metric, label in s.columns(b)} | {"nauc": "nAUC", "dr": "DR"}
    values: dict[Key, dict[str, str]] = {key: {m: s.text(key, m) for m in labels if m in row} for key, row in s.value.items()}
    for r in retention:
        values.setdefault(_key(r), {}).update({m: cell_text(r[m], 2) or "–" for m in ("nauc", "dr")})
    deltas = {key: {m: s.delta_text(key, m) for m in row} for key, row in s.delta.items()}
    return beside_paper(values, labels, deltas, baseline, names)


def paper_section(con: duckdb.DuckDBPyConnection, baseline: str | None) -> str | None:
    """The report's section of the paper's figures beside the sweep's (also the MLflow parent's), with
    its caption; None where the paper has no figure for any cell."""
    baseline = resolve_baseline(con, baseline)
    s = Scores(query_rows(con, "scores"), query_rows(con, "tokens"),
               query_rows(con, "delta_vs_baseline", baseline=baseline) if baseline else [])
    table = paper_table(con, s, query_rows(con, "depth_retention"), baseline)
    return None if table is None else "\n".join(["## The paper beside this sweep\n", PAPER_CAPTION, table])


def pass_hat_table(rows: list[Row]) -> str:
    ks = sorted({r["k"] for r in rows})
    by = {(*_key(r), r["k"]): r["pass_hat_k"] for r in rows}
    body = [[b, d, model, method] + [_pct(by.get((b, d, model, method, k))) for k in ks]
            for b, d, model, method in sorted({_key(r) for r in rows})]
    return markdown_table(["Benchmark", "Domain", "Model", "Method"] + [f"pass^{k}" for k in ks], body)


def internals_table(isu: list[Row], psa: list[Row], parse: list[Row]) -> str:
    p = {_key(r): r for r in psa}
    e = {_key(r): r for r in parse}
    body = []
    for r in sorted(isu, key=_key):
        k = _key(r)
        body.append([*k, cell_text(r["ops_per_step"], 2), _pct(r["acceptance_rate"]), str(r["rejected"]),
                     cell_text(p.get(k, {}).get("disclosed_per_request"), 2), _pct(e.get(k, {}).get("error_rate"))])
    return markdown_table(["Benchmark", "Domain", "Model", "Method", "ISU ops/step", "accepted %", "rejected",
                           "disclosed/request", "parse errors %"], body)


def figure3_points(s: Scores, baseline: str) -> tuple[list[Row], str]:
    """Per model and method: the first headline metric (%) and relative #Tok, each averaged over
    the domains (and benchmarks) with equal weight; the axis label."""
    performance: dict[tuple[str, str], list[float]] = defaultdict(list)
    relative: dict[tuple[str, str], list[float]] = defaultdict(list)
    labels = []
    for benchmark, columns in sorted(s.headline.items()):
        metric, label = columns[0]
        labels.append(label)
        for key in s.cells(benchmark):
            value = s.value[key].get(metric)
            if value is not None:
                performance[(key[2], key[3])].append(100 * value)
            change = s.delta.get(key, {}).get(TOKENS)
            if change is not None:
                relative[(key[2], key[3])].append(1 + change / 100)
    points = []
    for (model, method), values in sorted(performance.items()):
        if method == baseline:
            rel = 1.0
        elif relative.get((model, method)):
            rel = sum(relative[(model, method)]) / len(relative[(model, method)])
        else:
            continue
        points.append({"model": model, "method": method, "relative_tokens": rel,
                       "performance": sum(values) / len(values)})
    return points, " / ".join(dict.fromkeys(labels))


def sweep_cost_models(runs_dir: Path) -> dict[str, CostModel]:
    """Each agent model's cost model, from the sweeps' manifests (the first sweep naming a model wins)."""
    found: dict[str, CostModel] = {}
    for sweep in sweep_dirs(runs_dir):
        for model, cost in cost_models(read_manifest(sweep) or {}).items():
            found.setdefault(model, cost)
    return found


def cost_table(rows: list[Row], baseline: str | None) -> str:
    """Per cell: #Tok, the agent's uncached prompt and completion tokens, the cached share against the
    physical limit, the GPU-time estimate per episode and its change against the baseline."""
    by_key = {_key(r): r for r in rows}
    body = []
    for key in sorted(by_key):
        r = by_key[key]
        base = by_key.get((key[0], key[1], key[2], baseline)) if baseline else None
        change = None
        if base and key[3] != baseline and r["gpu_s_per_episode"] is not None and base["gpu_s_per_episode"]:
            change = 100 * (r["gpu_s_per_episode"] / base["gpu_s_per_episode"] - 1)
        body.append([*key, *(tokens_text(r[c]) for c in ("tokens", "uncached_prompt_tokens", "completion_tokens")),
                     _pct(r["cached_share_of_limit"]), cell_text(r["gpu_s_per_episode"], 3), _signed(change, "%")])
    sources = sorted({r["cost_source"] for r in rows if r["cost_source"]})
    note = (f"\nCost model: {'; '.join(sources)}." if sources else
            "\nNo cost model: state one under `analysis: {cost_model: {prefill_s_per_token: ..., decode_s_per_token: ...}}`.")
    return markdown_table(["Benchmark", "Domain", "Model", "Method", "#Tok", "uncached prompt", "completion",
                           "cached / limit %", "GPU s / episode (est.)", f"Δ vs. {baseline or '–'}"], body) + note


def uncached_points(rows: list[Row], s: Scores, baseline: str) -> list[Row]:
    """Figure 3's points with uncached prompt tokens in place of #Tok (relative to the baseline)."""
    relative: dict[tuple[str, str], list[float]] = defaultdict(list)
    by_key = {_key(r): r for r in rows}
    for (benchmark, domain, model, method), r in by_key.items():
        base = by_key.get((benchmark, domain, model, baseline))
        if base and base["uncached_prompt_tokens"] and r["uncached_prompt_tokens"] is not None:
            relative[(model, method)].append((r["uncached_prompt_tokens"] / r["episodes"])
                                             / (base["uncached_prompt_tokens"] / base["episodes"]))
    points, _ = figure3_points(s, baseline)
    return [{**p, "relative_tokens": sum(relative[(p["model"], p["method"])]) / len(relative[(p["model"], p["method"])])}
            for p in points if relative.get((p["model"], p["method"]))]


def build_report(runs_dir: Path | str, out_md: Path | str, *, baseline: str | None = None) -> Report:
    """Write the report (markdown) and its figures (PNG, next to it); the baseline defaults to the jobs'."""
    with connect(runs_dir) as con:
        return write_report(con, Path(runs_dir), Path(out_md), baseline=baseline or job_baseline(runs_dir))


def write_report(con: duckdb.DuckDBPyConnection, runs_dir: Path, out_md: Path, *, baseline: str | None) -> Report:
    """The report from an open connection over ``runs_dir`` (whose views it queries)."""
    baseline = resolve_baseline(con, baseline)
    compared = baseline is not None
    tokens = query_rows(con, "tokens")
    s = Scores(query_rows(con, "scores"), tokens,
               query_rows(con, "delta_vs_baseline", baseline=baseline) if compared else [])
    pairs = query_rows(con, "paired_outcomes", baseline=baseline) if compared else []
    pass_hat = query_rows(con, "pass_hat_k")
    retention = query_rows(con, "depth_retention")
    depth = query_rows(con, "depth_accuracy")
    internals = internals_table(query_rows(con, "isu_ops"), query_rows(con, "psa"), query_rows(con, "parse_errors"))
    sweeps = ", ".join(d.name for d in sweep_dirs(runs_dir))
    left_out = [p for d in sweep_dirs(runs_dir) for p in broken_files(d)]
    figures: list[Path] = []
    parts = [
        "# FlowState results\n",
        f"Runs: `{runs_dir}` (sweeps: {sweeps}); generated {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; "
        + (f"baseline: `{baseline}`.\n" if compared else "no baseline (the jobs name none: `analysis: {baseline: ...}`).\n"),
    ]
    if left_out:
        parts.append(f"**Incomplete**: {len(left_out)} files that are not whole Parquet files were left out "
                     f"({', '.join(f'`{p}`' for p in left_out)}); `flowstate verify` lists the episodes they held.\n")
    catalogs = sweep_catalogs(sweep_dirs(runs_dir))
    for benchmark in sorted({r["benchmark"] for r in s.rows}):
        catalog = catalogs.get(benchmark)
        parts.append(f"## {catalog.report_heading if catalog else 'Results'}\n")
        if catalog and catalog.report_caption:
            parts.append(catalog.report_caption + "\n")
        parts.append(main_table(s, benchmark, baseline, catalog))
    if pairs:
        parts += ["## Paired differences\n",
                  f"Method − {baseline} reward in percentage points over the (task, trial) pairs both ran; "
                  f"{LEVEL:.0%} percentile interval from {RESAMPLES:,} bootstrap resamples of the pairs "
                  f"(NumPy default_rng, seed {SEED}); none over fewer than {MIN_PAIRS} pairs.\n",
                  paired_table(pairs)]
    ablations = ablation_table(s, baseline)
    if ablations:
        parts += ["## Table 3: variants\n", ablations]
    table4 = retention_table(retention)
    if table4:
        parts += ["## Table 4: depth retention\n",
                  "R_k = 100 · Acc_k / Acc_1; nAUC = trapezoidal integral of R over k divided by K − 1; "
                  "DR = minus the least-squares slope of R over k (pp per depth).\n", table4]
    if pass_hat:
        parts += ["## pass^k\n", pass_hat_table(pass_hat)]
    paper = paper_table(con, s, retention, baseline)
    if paper:
        parts += ["## The paper beside this sweep\n", PAPER_CAPTION, paper]
    costs = with_gpu_seconds(tokens, sweep_cost_models(runs_dir))
    parts += ["## Cost\n", "Uncached prompt = prompt tokens minus those the engine reported cached, else minus the "
              "exact reusable prefix (token ids of the previous call on the same replica); cached / limit = that "
              "reuse over the physical limit (prompt minus the content each call added); GPU s = uncached × prefill "
              "+ completion × decode seconds per token.\n", cost_table(costs, baseline)]
    parts += ["## FlowState internals\n", internals]
    if baseline is not None:
        points, label = figure3_points(s, baseline)
        if any(p["method"] != baseline for p in points):
            path = out_md.with_name(f"{out_md.stem}_fig3_tokens.png")
            figures.append(plots.performance_vs_tokens(points, baseline, path, ylabel=f"{label} (%)"))
            parts += ["## Figure 3: performance against relative tokens\n", f"![Figure 3]({figures[-1].name})\n"]
        uncached = uncached_points(costs, s, baseline)
        if any(p["method"] != baseline for p in uncached):
            path = out_md.with_name(f"{out_md.stem}_fig3_uncached.png")
            figures.append(plots.performance_vs_tokens(uncached, baseline, path, ylabel=f"{label} (%)",
                                                       measure="uncached prompt tokens"))
            parts += ["## Figure 3b: performance against relative uncached prompt tokens\n",
                      f"![Figure 3b]({figures[-1].name})\n"]
    if depth:
        figures.append(plots.accuracy_by_depth(depth, out_md.with_name(f"{out_md.stem}_fig4_depth.png")))
        parts += ["## Figure 4: accuracy by request depth\n", f"![Figure 4]({figures[-1].name})\n"]
    write_text_atomic(out_md, "\n".join(parts))
    return Report(markdown=out_md, figures=figures)
