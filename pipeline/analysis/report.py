"""A markdown report in the layout of the paper's Tables 2–4, with paired bootstrap intervals and
the figures (3: performance against relative tokens; 4: accuracy by request depth)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
from pydantic import BaseModel

from pipeline.analysis import plots
from pipeline.analysis.formats import cell_text, markdown_table
from pipeline.analysis.query import connect, query_rows
from pipeline.store.files import sweep_dirs
from pipeline.analysis.stats import LEVEL, RESAMPLES, SEED, paired_bootstrap

BASELINE = "full_context"
Row = dict[str, Any]


class Report(BaseModel):
    markdown: Path
    figures: list[Path]


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def _signed(x: float | None, suffix: str = "") -> str:
    return "–" if x is None else f"{x:+.{2 if suffix else 1}f}{suffix}".replace("-", "−")


def _tokens(n: float | None) -> str:
    if n is None:
        return "–"
    for size, unit in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= size:
            return f"{n / size:.2f}{unit}"
    return f"{n:.0f}"


def _key(r: Row) -> tuple[str, str, str, str]:
    return r["benchmark"], r["domain"], r["model"], r["method"]


def _method_order(methods: Iterable[str], baseline: str) -> list[str]:
    return sorted(set(methods), key=lambda m: (m != baseline, m))


def main_table(scores: list[Row], tokens: list[Row], deltas: list[Row], baseline: str) -> str:
    """Table 2: per benchmark, PR / DB / Act. / #Tok per domain; Δ rows against the baseline."""
    tok = {_key(r): r["tokens"] for r in tokens}
    delta = {_key(r): r for r in deltas}
    out = []
    for benchmark in sorted({r["benchmark"] for r in scores}):
        rows = [r for r in scores if r["benchmark"] == benchmark]
        domains = sorted({r["domain"] for r in rows})
        score = {(r["domain"], r["model"], r["method"]): r for r in rows}
        header = ["Model", "Method"] + [f"{d.capitalize()} {m}" for d in domains for m in ("PR", "DB", "Act.", "#Tok")]
        body = []
        for model in sorted({r["model"] for r in rows}):
            methods = _method_order((r["method"] for r in rows if r["model"] == model), baseline)
            for method in methods:
                cells = []
                for d in domains:
                    s = score.get((d, model, method), {})
                    cells += [_pct(s.get("pass_rate")), _pct(s.get("db")), _pct(s.get("action")),
                              _tokens(tok.get((benchmark, d, model, method)))]
                body.append([model, method] + cells)
            for method in methods:
                if not any((benchmark, d, model, method) in delta for d in domains):
                    continue
                cells = []
                for d in domains:
                    r = delta.get((benchmark, d, model, method), {})
                    cells += [_signed(r.get("d_pass_rate")), _signed(r.get("d_db")), _signed(r.get("d_action")),
                              _signed(r.get("d_tokens_pct"), "%")]
                body.append([model, f"Δ {method} vs. {baseline}"] + cells)
        out.append(f"### {benchmark}\n\n{markdown_table(header, body)}")
    return "\n".join(out)


def paired_table(pairs: list[Row]) -> str:
    groups: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    for p in pairs:
        if p["reward"] is not None and p["baseline_reward"] is not None:
            groups[_key(p)].append(100 * (p["reward"] - p["baseline_reward"]))
    body = []
    for (benchmark, domain, model, method), diffs in sorted(groups.items()):
        ci = paired_bootstrap(diffs)
        body.append([benchmark, domain, model, method, str(ci.n), _signed(ci.mean), f"[{_signed(ci.low)}, {_signed(ci.high)}]"])
    return markdown_table(["Benchmark", "Domain", "Model", "Method", "Pairs", "ΔPR (pp)", f"{LEVEL:.0%} CI"], body)


def ablation_table(scores: list[Row], tokens: list[Row], baseline: str) -> str | None:
    """Table 3: every variant (method label other than the baseline) where a domain has two or more."""
    tok = {_key(r): r["tokens"] for r in tokens}
    body = []
    for (benchmark, domain, model), group in sorted(_group(scores, ("benchmark", "domain", "model")).items()):
        variants = [r for r in group if r["method"] != baseline]
        if len(variants) < 2:
            continue
        for r in sorted(variants, key=lambda r: r["method"]):
            body.append([benchmark, domain, model, r["method"], _pct(r["pass_rate"]), _pct(r["db"]),
                         _pct(r["action"]), _tokens(tok.get(_key(r)))])
    if not body:
        return None
    return markdown_table(["Benchmark", "Domain", "Model", "Variant", "PR", "DB", "Act.", "#Tok"], body)


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


def _group(rows: list[Row], keys: tuple[str, ...]) -> dict[tuple[Any, ...], list[Row]]:
    groups: dict[tuple[Any, ...], list[Row]] = defaultdict(list)
    for r in rows:
        groups[tuple(r[k] for k in keys)].append(r)
    return groups


def figure3_points(scores: list[Row], deltas: list[Row], baseline: str) -> list[Row]:
    """Per model and method: pass rate (%) and relative #Tok, each averaged over domains with equal weight."""
    relative = _group(deltas, ("model", "method"))
    points = []
    for (model, method), group in sorted(_group(scores, ("model", "method")).items()):
        rates = [100 * r["pass_rate"] for r in group if r["pass_rate"] is not None]
        if not rates:
            continue
        if method == baseline:
            rel = 1.0
        elif (model, method) in relative:
            changes = [r["d_tokens_pct"] for r in relative[(model, method)] if r["d_tokens_pct"] is not None]
            if not changes:
                continue
            rel = 1 + sum(changes) / len(changes) / 100
        else:
            continue
        points.append({"model": model, "method": method, "relative_tokens": rel, "pass_rate": sum(rates) / len(rates)})
    return points


def resolve_baseline(con: duckdb.DuckDBPyConnection, wanted: str) -> str:
    """The baseline's method label: ``wanted`` itself, else the one label of its family
    (``full_context-json`` when Full Context ran only on the JSON protocol)."""
    labels = {row[0] for row in con.sql("SELECT DISTINCT method FROM episodes").fetchall()}
    family = sorted(label for label in labels if label.startswith(f"{wanted}-"))
    return family[0] if wanted not in labels and len(family) == 1 else wanted


def build_report(runs_dir: Path | str, out_md: Path | str, *, baseline: str = BASELINE) -> Report:
    """Write the report (markdown) and its figures (PNG, next to it)."""
    with connect(runs_dir) as con:
        return write_report(con, Path(runs_dir), Path(out_md), baseline=baseline)


def write_report(con: duckdb.DuckDBPyConnection, runs_dir: Path, out_md: Path, *, baseline: str = BASELINE) -> Report:
    """The report from an open connection over ``runs_dir`` (whose views it queries)."""
    baseline = resolve_baseline(con, baseline)
    scores = query_rows(con, "pass_rate")
    tokens = query_rows(con, "tokens")
    deltas = query_rows(con, "delta_vs_full_context", baseline=baseline)
    pairs = query_rows(con, "paired_outcomes", baseline=baseline)
    pass_hat = query_rows(con, "pass_hat_k")
    retention = query_rows(con, "depth_retention")
    depth = query_rows(con, "depth_accuracy")
    internals = internals_table(query_rows(con, "isu_ops"), query_rows(con, "psa"), query_rows(con, "parse_errors"))
    sweeps = ", ".join(d.name for d in sweep_dirs(runs_dir))
    figures: list[Path] = []
    parts = [
        "# FlowState results\n",
        f"Runs: `{runs_dir}` (sweeps: {sweeps}); generated {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; "
        f"baseline: `{baseline}`.\n",
        "PR = pass rate (mean reward), DB = database accuracy, Act. = share of episodes matching every gold "
        "action, all in percent over scored episodes (infrastructure failures excluded); #Tok = the agent's "
        "prompt + completion tokens over finished episodes. Δ rows compare with the baseline on the same "
        "model and tasks: percentage points for PR/DB/Act., relative change of #Tok per episode.\n",
        "## Table 2: results per domain\n",
        main_table(scores, tokens, deltas, baseline),
    ]
    if pairs:
        parts += ["## Paired differences\n",
                  f"Method − {baseline} pass rate in percentage points over the (task, trial) pairs both ran; "
                  f"{LEVEL:.0%} percentile interval from {RESAMPLES:,} bootstrap resamples of the pairs "
                  f"(NumPy default_rng, seed {SEED}).\n",
                  paired_table(pairs)]
    ablations = ablation_table(scores, tokens, baseline)
    if ablations:
        parts += ["## Table 3: variants\n", ablations]
    table4 = retention_table(retention)
    if table4:
        parts += ["## Table 4: depth retention\n",
                  "R_k = 100 · Acc_k / Acc_1; nAUC = trapezoidal integral of R over k divided by K − 1; "
                  "DR = minus the least-squares slope of R over k (pp per depth).\n", table4]
    if pass_hat:
        parts += ["## pass^k\n", pass_hat_table(pass_hat)]
    parts += ["## FlowState internals\n", internals]
    points = figure3_points(scores, deltas, baseline)
    if any(p["method"] != baseline for p in points):
        figures.append(plots.performance_vs_tokens(points, baseline, out_md.with_name(f"{out_md.stem}_fig3_tokens.png")))
        parts += ["## Figure 3: performance against relative tokens\n", f"![Figure 3]({figures[-1].name})\n"]
    if depth:
        figures.append(plots.accuracy_by_depth(depth, out_md.with_name(f"{out_md.stem}_fig4_depth.png")))
        parts += ["## Figure 4: accuracy by request depth\n", f"![Figure 4]({figures[-1].name})\n"]
    out_md.parent.mkdir(parents=True, exist_ok=True)
    out_md.write_text("\n".join(parts), encoding="utf-8")
    return Report(markdown=out_md, figures=figures)
