"""Job files: strict parsing with errors that name the file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config import load_job
from pipeline.yaml_errors import ConfigError
from tests.conftest import REPO_ROOT

GOOD = """\
name: small
benchmarks:
  - {benchmark: taubench, domain: airline, tasks: ["0", "1"], reward_basis: classic}
methods:
  - {name: flowstate}
  - {name: full_context, protocol: json}
agents:
  - {deployment: oracle}
user_simulator: scripted
judge: none
deployments:
  oracle: {kind: scripted, name: oracle}
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return path


def test_a_valid_job_gets_the_papers_sampling_defaults(tmp_path):
    job = load_job(_write(tmp_path, GOOD))
    assert [m.display for m in job.methods] == ["flowstate", "full_context-json"]
    sampling = job.agents[0].sampling
    assert (sampling.temperature, sampling.top_p, sampling.max_tokens, sampling.enable_thinking) == (0.1, 1.0, 32768, False)


BOTH = {"flowstate", "full_context"}
EVERY = BOTH | {"flowstate_no_psa", "flowstate_no_isu", "bm25", "zipact", "zipact_bm25", "reasoningbank", "mem0"}


@pytest.mark.parametrize(("name", "cells", "episodes", "methods"), [
    ("oracle.yaml", 4, 328, BOTH), ("paper-taubench.yaml", 4, 328, BOTH), ("smoke.yaml", 4, 4, BOTH),
    ("oracle-memoryarena.yaml", 40, 150, EVERY), ("smoke-memoryarena.yaml", 6, 6, BOTH),
    ("taubench-methods.yaml", 18, 1476, EVERY), ("smoke-methods.yaml", 9, 9, EVERY),
])
def test_every_shipped_job_expands_to_its_sweep(name, cells, episodes, methods, monkeypatch):
    """Each job parses and expands (its ids are pinned in test_golden.py); all compare with Full Context."""
    monkeypatch.delenv("FLOWSTATE_MODEL", raising=False)
    from pipeline.sweep import expand

    job = load_job(REPO_ROOT / "jobs" / name)
    sweep = expand(job)
    assert (len(sweep.cells), len(sweep.episodes)) == (cells, episodes)
    assert job.analysis.baseline == "full_context" and {m.name for m in job.methods} == methods


# The paper's MemoryArena jobs read the dataset users fetch: checked here up to their cells.
PAPER_MEMORYARENA = {
    "paper-memoryarena.yaml": ({"bundled_shopping", "group_travel_planner", "formal_reasoning_math",
                                "formal_reasoning_phys"}, EVERY, 1, "full_context"),
    "paper-ablations.yaml": ({"group_travel_planner"}, {"flowstate", "flowstate_no_psa", "flowstate_no_isu"}, 1,
                             "flowstate"),
    "paper-models.yaml": ({"formal_reasoning_math", "formal_reasoning_phys"}, {"flowstate", "full_context"}, 3,
                          "full_context"),
}


@pytest.mark.parametrize("name", sorted(PAPER_MEMORYARENA))
def test_the_papers_memoryarena_jobs_have_its_settings(name, monkeypatch):
    from pipeline.sweep import job_cells

    for variable in ("FLOWSTATE_MODEL", "FLOWSTATE_MODEL_A", "FLOWSTATE_MODEL_B", "FLOWSTATE_API_MODEL"):
        monkeypatch.delenv(variable, raising=False)
    domains, methods, models, baseline = PAPER_MEMORYARENA[name]
    job = load_job(REPO_ROOT / "jobs" / name)
    cells = job_cells(job)
    assert {c.domain for c in cells} == domains and {c.method.name for c in cells} == methods
    assert len(cells) == len(domains) * len(methods) * models and job.analysis.baseline == baseline
    assert all(c.benchmark.source == "hf" and c.benchmark.tasks is None and c.benchmark.limit is None for c in cells)
    for agent in job.agents:
        s = agent.sampling
        assert (s.temperature, s.top_p, s.max_tokens, s.enable_thinking) == (0.1, 1.0, 32768, False)
    assert all(c.method.history_tokens == 120_000 for c in cells if c.method.name == "full_context")
    assert job.limits.max_steps_per_request == 2 * cells[0].benchmark.max_tool_steps
    monkeypatch.setenv("FLOWSTATE_MODEL", "org/other-model")
    assert load_job(REPO_ROOT / "jobs" / name).deployments != job.deployments or name == "paper-models.yaml"


def test_the_shipped_jobs_are_the_ones_tested():
    assert sorted(p.name for p in (REPO_ROOT / "jobs").glob("*.yaml")) == sorted(
        ["oracle.yaml", "paper-taubench.yaml", "smoke.yaml", "smoke-vllm.yaml", "oracle-memoryarena.yaml",
         "smoke-memoryarena.yaml", "taubench-methods.yaml", "smoke-methods.yaml", *PAPER_MEMORYARENA])


@pytest.mark.parametrize(("edit", "expected"), [
    (("judge: none", "judge: none\ncolour: blue"), r"job.yaml:11: unknown key 'colour'"),
    (("  - {name: flowstate}", "  - {name: flowstate, protocol: xml}"),
     r"job.yaml:5: methods.0.protocol: Input should be 'tagged' or 'json'"),
    (("domain: airline", "domain: banking"), r"job.yaml:3: benchmarks.0.domain"),
    (("name: small\n", ""), r"missing key 'name'"),
    (("  oracle: {kind: scripted, name: oracle}", "  other: {kind: scripted, name: oracle}"),
     r"'oracle' is not under 'deployments'"),
    (("  oracle: {kind: scripted, name: oracle}", "  oracle: {kind: vllm}"),
     r"job.yaml:12: missing key 'deployments.oracle.model'"),
    # the unions of registered plug-ins: an unknown name lists the known ones, an option is the plug-in's own
    (("  - {name: flowstate}", "  - {name: bm26}"), r"job.yaml:5: methods.0: Input tag 'bm26' .*'flowstate', 'full_context'"),
    (("  - {name: flowstate}", "  - {name: flowstate, top_k: 3}"), r"job.yaml:5: unknown key 'methods.0.top_k'"),
    (("{benchmark: taubench, domain: airline", "{benchmark: webarena, domain: airline"),
     r"job.yaml:3: benchmarks.0: Input tag 'webarena' .*expected tags: (?=.*'memoryarena')(?=.*'taubench')"),
    (("{benchmark: taubench, domain: airline", "{domain: airline"),
     r"benchmarks.0: Unable to extract tag using discriminator 'benchmark'"),
    (("  oracle: {kind: scripted, name: oracle}", "  oracle: {kind: tgi, name: oracle}"), r"deployments.oracle: Input tag 'tgi'"),
    # roles: the benchmark says which it needs
    (("user_simulator: scripted\n", ""), r"taubench needs a user_simulator"),
    (("judge: none", "judge: scripted"),
     r"judge: scripted, but benchmark 'taubench' has no scripted judge \(it has: user_simulator\)"),
    (("judge: none", "judge: none\nmemory: {deployment: elsewhere}"),
     r"memory.deployment 'elsewhere' is not under 'deployments'"),
])
def test_bad_jobs_name_the_line_and_key(tmp_path, edit, expected):
    old, new = edit
    text = GOOD.replace(old, new)
    with pytest.raises(ConfigError, match=expected):
        load_job(_write(tmp_path, text))


def test_a_retail_task_basis_without_a_judge_is_refused(tmp_path):
    text = GOOD.replace("domain: airline, tasks: [\"0\", \"1\"], reward_basis: classic", "domain: retail")
    with pytest.raises(ConfigError, match="name a judge"):
        load_job(_write(tmp_path, text))


def test_roles_added_later_and_analysis_leave_the_ids_alone(tmp_path):
    from pipeline.sweep import expand

    base = expand(load_job(_write(tmp_path, GOOD)))
    more = expand(load_job(_write(tmp_path, GOOD + "analysis: {baseline: full_context}\nplugins: []\n")))
    assert base.sweep_id == more.sweep_id
    assert [e.episode_id for e in base.episodes] == [e.episode_id for e in more.episodes]
    # a tool model is part of every episode's identity once set (a benchmark's tools call it)
    tool = expand(load_job(_write(tmp_path, GOOD + "tool_model: {deployment: oracle}\n")))
    assert tool.sweep_id != base.sweep_id and not {e.episode_id for e in tool.episodes} & {e.episode_id for e in base.episodes}
    # a memory model only for methods that call one: FlowState and Full Context do not
    memory = expand(load_job(_write(tmp_path, GOOD + "memory: {deployment: oracle, sampling: {temperature: 0}}\n")))
    assert [e.episode_id for e in memory.episodes] == [e.episode_id for e in base.episodes]


@pytest.mark.parametrize("text", ["name: [unclosed", "- just\n- a list\n"])
def test_not_yaml_or_not_a_mapping(tmp_path, text):
    with pytest.raises(ConfigError, match="job.yaml"):
        load_job(_write(tmp_path, text))


def test_a_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_job(tmp_path / "nope.yaml")


def test_where_vllm_is_installed_is_no_part_of_any_id(monkeypatch, tmp_path):
    """The same job run from another checkout, or with another engine environment, resumes the same
    sweep: the interpreter's path names where vLLM runs, not what it computes."""
    from pipeline.sweep import expand

    def ids(python: str | None) -> tuple[str, list[str]]:
        if python is None:
            monkeypatch.delenv("FLOWSTATE_VLLM_PYTHON", raising=False)
        else:
            monkeypatch.setenv("FLOWSTATE_VLLM_PYTHON", python)
        sweep = expand(load_job(REPO_ROOT / "jobs" / "smoke-vllm.yaml"))
        return sweep.sweep_id, [e.episode_id for e in sweep.episodes]

    default = ids(None)
    monkeypatch.chdir(tmp_path)  # the default is relative: another start directory, another path
    assert ids(None) == default == ids("/opt/elsewhere/bin/python")
    job = load_job(REPO_ROOT / "jobs" / "smoke-vllm.yaml")
    assert str(job.deployments["smollm2"].python) == "/opt/elsewhere/bin/python"  # still what runs
