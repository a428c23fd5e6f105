"""The README and the documentation site say what the code does.

The README stays a short start (its first code block: the two commands CI runs, `.ci/run`); the
site's job-file and SQL references are generated from the code (pipeline/config/reference.py,
pipeline/analysis/reference.py) and must name every option, table, column and query; the shipped
jobs each have a line in jobs/README.md, and jobs/template.yaml is a job that runs. `mkdocs build
--strict` (the README's test command) checks every link between the pages.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from flowstate import METHODS
from pipeline.analysis.catalog import list_queries
from pipeline.analysis.query import load_query
from pipeline.analysis.reference import query_columns, sql_reference
from pipeline.benchmarks.base import BENCHMARKS
from pipeline.config.job import JobConfig, load_job
from pipeline.config.reference import job_reference
from pipeline.llm.deployments import DEPLOYMENT_KINDS
from pipeline.store.schema import SCHEMAS
from tests.conftest import DATA_DIR, REPO_ROOT

README = REPO_ROOT / "README.md"
DOCS = REPO_ROOT / "docs"


def _first_code_block(text: str) -> list[str]:
    """The lines of the first fenced block, as `.ci/run` reads them."""
    block = text.split("```", 2)[1]
    return [line for line in block.splitlines()[1:] if line.strip()]


def _section(markdown: str, heading: str) -> str:
    """The text under ``heading`` up to the next heading of the same or a higher level."""
    level = heading.split(" ")[0]
    start = ("\n" + markdown).index(f"\n{heading}\n") - 1
    rest = markdown[start + len(heading) + 2:]
    end = re.search(rf"^#{{1,{len(level)}}} ", rest, flags=re.M)
    return rest[:end.start()] if end else rest


def test_the_readme_is_short_and_its_first_code_block_holds_the_two_one_line_commands() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    run, test = _first_code_block(text)
    assert "flowstate run jobs/smoke.yaml" in run and run.startswith("./scripts/setup.sh")
    assert not run.endswith("\\") and not test.endswith("\\")
    for step in ("ruff check .", "lint-imports", "mypy", "mkdocs build --strict", "pytest"):
        assert step in test


def test_getting_started_shows_the_readmes_two_commands_as_they_are() -> None:
    page = (DOCS / "getting-started.md").read_text()
    blocks = [line for block in page.split("```")[1::2] for line in block.splitlines()[1:]]
    assert [c for c in _first_code_block(README.read_text()) if c not in blocks] == []


def test_ci_runs_the_readmes_second_command() -> None:
    extracted = subprocess.run(["bash", "-c", "awk '/^```/{fence++; next} fence==1' README.md | sed -n 2p"],
                               cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout.strip()
    assert extracted == _first_code_block(README.read_text())[1]
    assert "awk '/^```/{fence++; next} fence==1' README.md | sed -n 2p" in (REPO_ROOT / ".ci" / "run").read_text()


def test_the_readme_says_to_activate_the_environment_and_links_pages_that_exist() -> None:
    text = README.read_text()
    assert "source .venv/bin/activate" in text and ".venv/bin/flowstate" in text
    links = re.findall(r"\]\((docs/[^)#]+)", text)
    assert len(links) >= 10
    assert [link for link in links if not (REPO_ROOT / link).is_file()] == []


def test_every_page_is_in_the_sites_navigation() -> None:
    nav = (REPO_ROOT / "mkdocs.yml").read_text()
    assert sorted(p.name for p in DOCS.glob("*.md") if f": {p.name}" not in nav) == []


def test_the_job_reference_names_every_key_of_every_registered_benchmark_method_and_deployment_kind() -> None:
    reference = job_reference()
    for registry in (BENCHMARKS, METHODS, DEPLOYMENT_KINDS):
        for name, model in registry.models().items():
            section = _section(reference, f"### `{registry.discriminator}: {name}`")
            missing = [key for key in model.model_fields if f"| `{key}` |" not in section]
            assert missing == [], f"{registry.what} {name}"
    taubench = _section(reference, "### `benchmark: taubench`")
    assert re.search(r"\| `max_env_steps` \| int \(> 0\) \| `200` \| Upstream's episode limits", taubench)


def test_the_job_reference_names_every_key_of_the_job_and_of_the_settings_under_it() -> None:
    reference = job_reference()
    job = _section(reference, "## The job file")
    assert [key for key in JobConfig.model_fields if f"| `{key}` |" not in job] == []
    execution = _section(reference, "### Execution")
    assert "| `concurrency` | int (> 0) | `16` | Episodes in flight at once" in execution
    for linked in re.findall(r"\]\(#([a-z-]+)\)", reference):  # every type named has a table of its own
        assert re.search(rf"^##+ {linked.replace('-', ' ')}$", reference.lower(), flags=re.M), linked


def test_a_plug_in_of_ones_own_appears_in_the_job_reference() -> None:
    import examples.last_n  # noqa: F401  (registers last_n and recall, as `plugins:` would)
    import examples.tiny  # noqa: F401

    reference = job_reference()
    assert "| `window` | int (≥ 1) | `4` |" in _section(reference, "### `name: last_n`")
    assert "| `tasks` |" in _section(reference, "### `benchmark: tiny`")


def test_the_sql_reference_names_every_table_column_and_shipped_query() -> None:
    reference = sql_reference()
    tables = _section(reference, "## Tables")
    for table, schema in SCHEMAS.items():
        section = _section(tables, f"### `{table}`")
        assert [c for c in schema.names if f"| `{c}` |" not in section] == [], table
    queries = _section(reference, "## Shipped queries")
    for name in list_queries():
        section = _section(queries, f"### `{name}`")
        spec = load_query(name)
        assert [p.name for p in spec.params if f"| `{p.name}` |" not in section] == [], name
        assert "Columns: `" in section


def test_a_querys_columns_are_read_from_the_query_itself() -> None:
    columns = [f.name for f in query_columns(load_query("pass_rate"))]
    assert columns[:4] == ["benchmark", "domain", "method", "model"]
    assert {"pass_rate", "success_rate", "evaluated", "failed"} <= set(columns)
    delta = {f.name: str(f.type) for f in query_columns(load_query("delta_vs_baseline"))}
    assert delta["delta_pp"] == delta["delta_pct"] == "double" and "baseline_value" in delta


def test_every_shipped_job_has_a_line_in_the_jobs_guide() -> None:
    guide = (REPO_ROOT / "jobs" / "README.md").read_text()
    jobs = sorted(p.name for p in (REPO_ROOT / "jobs").glob("*.yaml") if p.name != "template.yaml")
    assert [job for job in jobs if f"| `{job}` |" not in guide] == []


def test_the_job_template_is_a_job_that_dry_runs(tmp_path: Path) -> None:
    job = load_job(REPO_ROOT / "jobs" / "template.yaml")
    assert isinstance(job, JobConfig) and job.analysis.baseline == "full_context"
    proc = subprocess.run([sys.executable, "-m", "pipeline.cli", "run", "jobs/template.yaml", "--dry-run",
                           "--out", str(tmp_path / "runs")],
                          cwd=REPO_ROOT, env={**os.environ, "FLOWSTATE_DATA": str(DATA_DIR)}, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "dry run: nothing started" in proc.stdout and "taubench.airline.flowstate-json.smollm2-135m" in proc.stdout
    assert not (tmp_path / "runs").exists()
