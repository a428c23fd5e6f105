"""The paper's figures as data: every one checked against the paper's text, the lookups, the report's
section beside a sweep's own results."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import pytest

from pipeline.analysis.paper_figures import FIGURES_FILE, PaperFigure, paper_figures
from pipeline.analysis.report import build_report
from tests.conftest import REPO_ROOT
from tests.pipeline.analysis.builder import SweepBuilder

PAPER = REPO_ROOT.parent / "shared" / "paper" / "FlowState-paper.txt"
DEEPSEEK, GPT, QWEN = "DeepSeek-V4-Flash", "GPT-5.6-terra", "Qwen3.5-397B-A17B"

# How the paper names this project's domains, metrics and methods, per table where it differs.
DOMAINS = {
    1: {"bundled_shopping": "Bundled Web Shopping", "group_travel_planner": "Group Travel Planning",
        "formal_reasoning_math": "Math", "formal_reasoning_phys": "Physics"},
    2: {"airline": "Airline", "retail": "Retail"},
    3: {"group_travel_planner": "Travel Planning", "bundled_shopping": "Web Shopping"},
    4: {"bundled_shopping": "Web Shopping", "group_travel_planner": "Travel Planning",
        "formal_reasoning": "Formal Reasoning"},
    5: {"bundled_shopping": "Web Shopping", "formal_reasoning_math": "Math", "formal_reasoning_phys": "Physics"},
}
BENCHMARKS = {1: "memoryarena", 2: "taubench", 3: "memoryarena", 4: "memoryarena", 5: "memoryarena"}
METRICS = {"SR": {"SR"}, "PS": {"PS"}, "sPS": {"sPS"}, "tokens": {"#Tok.", "Tok. (M)"}, "pass_rate": {"PR"},
           "db": {"DB"}, "action": {"Act."}, "nauc": {"nAUC"}, "dr": {"DR"}}
ROWS = {"full_context": {"Full Context"}, "flowstate": {"FlowState (Ours)", "FlowState"},
        "reasoningbank": {"ReasoningBank"}, "bm25": {"BM25"}, "mem0": {"Mem0"}, "zipact": {"ZipAct"},
        "zipact_bm25": {"ZipAct+BM25"}, "flowstate_no_psa": {"w/o PSA"}, "flowstate_no_isu": {"w/o ISU"}}
UNITS = {"tokens": "M tokens", "dr": "pp/subtask"}
Cell = tuple[int, str | None, str, str, str]  # table, block (Table 5's model), row, domain header, metric header


def parse_tables(text: str) -> dict[Cell, str]:
    """Every printed cell of Tables 1–5 (blank ones, "–", left out): the rows are the tab-separated
    lines after a table's caption, the columns named by the two header lines above them."""
    lines = text.splitlines()
    captions = [i for i, line in enumerate(lines) if re.match(r"Table [1-5]:", line)]
    ends = [i for i, line in enumerate(lines) if re.match(r"Table \d+:|Note\.", line)]
    cells: dict[Cell, str] = {}
    for start in captions:
        table = int(lines[start][6])
        block, headers = None, None
        body = lines[start + 1:min(e for e in ends if e > start)]
        for i, line in enumerate(body):
            fields = line.split("\t")
            if len(fields) == 1:
                block = line.strip() if line.strip() in (DEEPSEEK, GPT, QWEN) else block
            elif fields[0] in ("Method", "Variant"):
                domains = body[i - 1].split("\t")  # each domain spans its column and the blank ones after it
                headers = [(next((d for d in reversed(domains[:k + 1]) if d), ""),
                            re.sub(r"\s*\$\\(up|down)arrow\$", "", f).strip()) for k, f in enumerate(fields)]
            elif headers and fields[0]:
                for (domain, metric), value in zip(headers[1:], fields[1:], strict=True):
                    if value.strip() != "–":
                        cells[(table, block if table == 5 else None, fields[0], domain, metric)] = \
                            value.replace("$", "").strip()
    return cells


def paper_cell(f: PaperFigure, cells: dict[Cell, str]) -> str | None:
    """The paper's printed value where ``f`` says it is: the row by method name (Table 1's Full
    Context rows by their model; a Δ row by its Δ), the column by the domain and metric headers."""
    block = f.model if f.table == 5 else None
    for (table, b, row, domain, metric), value in cells.items():
        if (table, b) != (f.table, block) or domain != DOMAINS[f.table].get(f.domain) or metric not in METRICS[f.metric]:
            continue
        primary = f.table == 5 or f.model == DEEPSEEK  # Table 5 names a model per block; the others run DeepSeek
        if f.versus is not None:
            found = primary and row.startswith("$\\Delta$") and (f.method, f.versus) == ("flowstate", "full_context")
        elif f.table == 1 and f.method == "full_context":
            found = row == f.model
        else:
            found = primary and row in ROWS[f.method]
        if found:
            return value
    return None


@pytest.fixture(scope="module")
def paper_cells() -> dict[Cell, str]:
    if not PAPER.is_file():
        pytest.skip(f"the paper's text is not at {PAPER} (CI has it at ../shared/paper/ beside the checkout)")
    return parse_tables(PAPER.read_text())


def test_every_figure_is_the_papers_and_every_number_of_tables_1_to_5_is_a_figure(paper_cells) -> None:
    figures = paper_figures().figures
    wrong = [f for f in figures if paper_cell(f, paper_cells) != f.value]
    assert wrong == []
    assert len(paper_cells) == len(set(figures)) == len(figures) == 294  # all of them, none twice
    for f in figures:
        assert f.benchmark == BENCHMARKS[f.table]
        assert f.unit == ("% change" if f.metric == "tokens" else "pp") if f.versus else f.unit == UNITS.get(f.metric, "%")
    # where two tables print the same figure (Table 5 and Table 3 repeat Table 1), they agree
    same: dict[tuple[str | None, ...], set[float]] = {}
    for f in figures:
        same.setdefault((f.model, f.benchmark, f.domain, f.method, f.versus, f.metric), set()).add(f.number)
    assert all(len(numbers) == 1 for numbers in same.values())


def test_a_typo_in_the_data_is_caught(paper_cells) -> None:
    figure = paper_figures().cell("taubench", "retail", "flowstate", "action", versus="full_context")[DEEPSEEK]
    assert paper_cell(figure, paper_cells) == figure.value == "-4.9"  # printed as $-4.9$
    for typo in ({"value": "-4.8"}, {"domain": "airline"}, {"metric": "db"}, {"method": "full_context"},
                 {"model": GPT}, {"table": 1}):
        wrong = figure.model_copy(update=typo)
        assert paper_cell(wrong, paper_cells) != wrong.value


def test_the_figures_file_is_package_data() -> None:
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["pipeline"]
    assert any(fnmatch.fnmatch(str(FIGURES_FILE.relative_to(REPO_ROOT / "pipeline")), p) for p in patterns)


def test_a_cell_gives_the_papers_figure_per_model() -> None:
    figures = paper_figures()
    ps = figures.cell("memoryarena", "bundled_shopping", "full_context", "PS")
    assert {model: f.value for model, f in ps.items()} == {DEEPSEEK: "21.11", GPT: "33.89", QWEN: "19.56"}
    assert set(figures.cell("memoryarena", "group_travel_planner", "full_context", "SR")) == {DEEPSEEK, QWEN}  # GPT: "–"
    tokens = figures.cell("memoryarena", "formal_reasoning_math", "flowstate", "tokens", versus="full_context")
    assert {model: f.text for model, f in tokens.items()} == {QWEN: "−27.24%", DEEPSEEK: "−73.01%", GPT: "−43.26%"}
    assert figures.cell("memoryarena", "formal_reasoning_math", "flowstate", "tokens")[QWEN].text == "14.53M"
    assert figures.cell("taubench", "airline", "mem0", "pass_rate") == {}


def test_the_report_shows_the_papers_figures_beside_the_sweeps(scores_sweep: SweepBuilder, tmp_path: Path) -> None:
    text = build_report(scores_sweep.root, tmp_path / "report.md").markdown.read_text()
    section = text[text.index("## The paper beside this sweep"):text.index("## Cost")]
    lines = section.splitlines()
    assert f"| Domain | Model | Method | Metric | this sweep | paper, {DEEPSEEK} |" in lines
    assert "| airline | m1 | full_context | PR | 55.6 | 58.0 |" in lines  # Table 2
    assert "| airline | m1 | full_context | #Tok | 9.90K | 21.03M |" in lines
    assert "| airline | m1 | flowstate | Δ PR vs. full_context | +33.3 | +20.0 |" in lines
    assert "| airline | m1 | flowstate | Δ #Tok vs. full_context | −44.70% | −61.21% |" in lines
    assert not any("| full_context | Δ" in line for line in lines)  # the baseline against itself: no row
