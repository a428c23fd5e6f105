"""Job files: strict parsing with errors that name the file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config.job import load_job
from pipeline.config.yaml_loader import ConfigError
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
    from pipeline.config.sweep import expand

    job = load_job(REPO_ROOT / "jobs" / name)
    sweep = expand(job)
    assert (len(sweep.cells), len(sweep.episodes)) == (cells, episodes) == (len(set(c.cell_id for c in sweep.cells)),
                                                                           len(set(sweep.episodes.ids())))
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
    from pipeline.config.sweep import job_cells

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
         "smoke-memoryarena.yaml", "taubench-methods.yaml", "smoke-methods.yaml", "template.yaml", *PAPER_MEMORYARENA])


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
    from pipeline.config.sweep import expand

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


def _locate(tmp_path, text):
    """The job through the real first phase of `flowstate run`: load, then expand."""
    from pipeline.run.plan import locate_sweep

    return locate_sweep(_write(tmp_path, text))[0]


TWINS = [
    # two methods that differ only by label (a natural way to ask for repeats)
    (("  - {name: full_context, protocol: json}", "  - {name: flowstate, label: fs-b}"),
     r"job.yaml: methods\[0\] \('flowstate'\) and methods\[1\] \('fs-b'\) make the same cells"),
    # two agents that differ only by label, or by the name of a deployment of the same model
    (("  - {deployment: oracle}", "  - {deployment: oracle, label: run-1}\n  - {deployment: oracle, label: run-2}"),
     r"job.yaml: agents\[0\] \('run-1'\) and agents\[1\] \('run-2'\) make the same cells .*raise trials:"),
    (("  - {deployment: oracle}", "  - {deployment: oracle}\n  - {deployment: again}"),
     r"agents\[0\] \('oracle'\) and agents\[1\] \('again'\) make the same cells"),
    # the same benchmark cell twice
    (("reward_basis: classic}", "reward_basis: classic}\n  - {benchmark: taubench, domain: airline, tasks: ['0', '1'], "
      "reward_basis: classic}"), r"benchmarks\[0\] \('airline'\) and benchmarks\[1\] \('airline'\) make the same cells"),
]


@pytest.mark.parametrize(("edit", "expected"), TWINS)
def test_entries_that_differ_only_by_name_are_refused_before_they_share_a_cell(tmp_path, edit, expected):
    text = GOOD.replace(*edit) + "  again: {kind: scripted, name: oracle}\n"
    with pytest.raises(ConfigError, match=expected):
        _locate(tmp_path, text)


def test_entries_with_their_own_options_keep_their_own_cells_and_ids(tmp_path):
    """What differs in anything but a name is two cells, as before: the ids of valid jobs stay."""
    text = GOOD.replace("  - {deployment: oracle}", "  - {deployment: oracle, label: cold}\n"
                        "  - {deployment: oracle, label: warm, sampling: {temperature: 0.7}}")
    sweep = _locate(tmp_path, text)
    assert [c.label.removeprefix("taubench.airline.") for c in sweep.cells] == [
        "flowstate.cold", "flowstate.warm", "full_context-json.cold", "full_context-json.warm"]
    assert len({c.cell_id for c in sweep.cells}) == 4 and len(set(sweep.episodes.ids())) == len(sweep.episodes) == 8


@pytest.mark.parametrize("tasks", ['["0", "0"]', '["0", "1", "0"]'])
def test_a_task_listed_twice_is_refused(tmp_path, tasks):
    with pytest.raises(ConfigError, match=r"job.yaml: benchmarks\[0\].tasks: task '0' is listed more than once"):
        _locate(tmp_path, GOOD.replace('tasks: ["0", "1"]', f"tasks: {tasks}"))


def test_the_limit_on_episodes_is_the_jobs_own(tmp_path):
    """Counted, not made (test_cli.py refuses a trillion trials in a process of 1 GiB); a job may raise it."""
    with pytest.raises(ConfigError, match=r"job.yaml: trials: 2 × 2 tasks × 2 methods × 1 agents = 8 episodes, beyond "
                                          r"the 7 a job may have: lower trials or tasks, or raise execution.max_episodes"):
        _locate(tmp_path, GOOD + "trials: 2\nexecution: {max_episodes: 7}\n")
    assert len(_locate(tmp_path, GOOD + "trials: 2\nexecution: {max_episodes: 8}\n").episodes) == 8


@pytest.mark.parametrize(("edits", "expected"), [
    ([("  - {name: flowstate}", "  - {name: flowstate, label: 'fs|paper'}")], r"methods\[0\].label: 'fs\|paper': a label"),
    ([("  - {deployment: oracle}", '  - {deployment: oracle, label: "run\\n2"}')], r"agents\[0\].label: 'run\\n2': a label"),
    # an agent's label is its deployment's name unless it has one
    ([("deployment: oracle}", "deployment: 'or|acle'}"), ("  oracle: {kind", "  'or|acle': {kind")],
     r"agents\[0\].deployment: 'or\|acle': a label may not hold '\|' or a line break"),
])
def test_a_label_with_a_bar_or_a_line_break_is_refused(tmp_path, edits, expected):
    text = GOOD
    for old, new in edits:
        text = text.replace(old, new)
    with pytest.raises(ConfigError, match=f"job.yaml: {expected}"):
        load_job(_write(tmp_path, text))


@pytest.mark.parametrize(("baseline", "refused"), [
    ("full_context-json", False), ("full_context", False),  # a method's name, when one label has it (as the report reads it)
    ("oracle", True), ("full-context", True), ("flowstate-json", True),
])
def test_the_baseline_names_a_method_of_the_job(tmp_path, baseline, refused):
    path = _write(tmp_path, GOOD + f"analysis: {{baseline: {baseline}}}\n")
    if not refused:
        assert load_job(path).analysis.baseline == baseline
        return
    with pytest.raises(ConfigError, match=rf"job.yaml: analysis.baseline: '{baseline}' is not the label of one of the "
                                          r"job's methods \(flowstate, full_context-json\)"):
        load_job(path)


@pytest.mark.parametrize(("edit", "line", "key", "first"), [
    (("judge: none", "judge: none\nname: other"), 11, "name", 1),
    (("  oracle: {kind: scripted, name: oracle}", "  oracle: {kind: scripted, name: oracle, name: other}"), 12, "name", 12),
    (("  oracle: {kind: scripted, name: oracle}", "  oracle: {kind: scripted, name: oracle}\n  oracle: {kind: scripted, "
      "name: other}"), 13, "oracle", 12),
])
def test_a_key_twice_in_a_mapping_is_an_error_not_the_last_one(tmp_path, edit, line, key, first):
    with pytest.raises(ConfigError, match=rf"job.yaml:{line}: duplicate key '{key}' \(first on line {first}\)"):
        load_job(_write(tmp_path, GOOD.replace(*edit)))


def test_a_merge_key_may_be_overridden(tmp_path):
    text = GOOD.replace("  oracle: {kind: scripted, name: oracle}",
                        "  base: &base {kind: scripted, name: other}\n  oracle: {<<: *base, name: oracle}")
    assert load_job(_write(tmp_path, text)).deployments["oracle"].name == "oracle"


def _tree_size(data) -> int:
    """Nodes of plain data as YAML counts them: a mapping, each key and value, a sequence, each item."""
    if isinstance(data, dict):
        return 1 + sum(1 + _tree_size(v) for v in data.values())
    if isinstance(data, list):
        return 1 + sum(map(_tree_size, data))
    return 1


def _levels(anchor: str, width: int, depth: int) -> list[str]:
    """``depth`` flow sequences, each ``width`` aliases of the one before: width^depth leaves."""
    lines = [f"{anchor}0: &{anchor}0 [{', '.join(['x'] * width)}]"]
    lines += [f"{anchor}{d}: &{anchor}{d} [{', '.join([f'*{anchor}{d - 1}'] * width)}]" for d in range(1, depth)]
    return lines


def test_alias_expansion_is_counted_without_expanding(tmp_path):
    import yaml

    from pipeline.config.yaml_loader import MAX_NODES, expanded_size

    small = "\n".join(_levels("l", 3, 4)) + "\nother: {a: *l2, b: [*l1, *l0]}\n"
    assert expanded_size(yaml.compose(small, Loader=yaml.SafeLoader)) == _tree_size(yaml.safe_load(small)) == 245
    # a bomb of under 1 KB: 10^8 leaves, refused by its count before anything walks them
    bomb = "name: bomb\n" + "\n".join(_levels("l", 10, 8)) + "\n"
    assert len(bomb) < 1024
    sizes = [11]  # each level: the sequence and its 10 items
    for _ in range(7):
        sizes.append(1 + 10 * sizes[-1])
    count = 1 + 2 + sum(1 + s for s in sizes)  # the mapping, name: bomb, each level's key and sequence
    assert expanded_size(yaml.compose(bomb, Loader=yaml.SafeLoader)) == count > 10**8
    with pytest.raises(ConfigError, match=rf"job.yaml: its aliases expand it to {count:,} YAML nodes, beyond the "
                                          rf"{MAX_NODES:,} a job file may hold"):
        load_job(_write(tmp_path, bomb))


def test_aliases_under_a_free_form_mapping_are_bounded(tmp_path):
    """A valid job may use aliases (in engine_args, say, which no model checks) up to the bound, not beyond."""
    import yaml

    from pipeline.config.yaml_loader import MAX_NODES

    def job(depth: int) -> str:
        args = ", ".join(_levels("a", 10, depth)).replace("x", '"x"')
        return GOOD + f"  big: {{kind: vllm, model: m, engine_args: {{{args}}}}}\n"

    loaded = load_job(_write(tmp_path, job(3)))
    assert loaded.deployments["big"].engine_args["a2"] == [[["x"] * 10] * 10] * 10
    count = _tree_size(yaml.safe_load(job(5)))  # the data as a tree, walked node by node
    assert MAX_NODES < count < 2 * MAX_NODES
    with pytest.raises(ConfigError, match=rf"job.yaml: its aliases expand it to {count:,} YAML nodes, beyond the "
                                          rf"{MAX_NODES:,}"):
        load_job(_write(tmp_path, job(5)))


@pytest.mark.parametrize(("text", "expected"), [
    ("name: &a [*a]\n", r"job.yaml: an alias names a node that contains it, so the file expands without end"),
    ("name: " + "[" * 1000 + "]" * 1000 + "\n", r"job.yaml: not valid YAML: nested too deeply"),
])
def test_a_file_without_end_or_too_deep_is_refused(tmp_path, text, expected):
    with pytest.raises(ConfigError, match=expected):
        load_job(_write(tmp_path, text))


def test_only_group_travel_cells_carry_a_text_revision():
    """Group travel's base plan text lost a stray newline (CONTRACT §4.1), so its cells have new ids and
    never resume onto results made with the old text; every other cell keeps its id (test_golden.py)."""
    from pipeline.benchmarks.memoryarena.benchmark import MemoryArenaCell
    from pipeline.benchmarks.memoryarena.data import CONFIGS

    identities = {domain: MemoryArenaCell(domain=domain).identity() for domain in CONFIGS}
    assert [d for d, identity in identities.items() if "text_revision" in identity] == ["group_travel_planner"]
    assert identities["group_travel_planner"]["text_revision"] == 1


def test_where_vllm_is_installed_is_no_part_of_any_id(monkeypatch, tmp_path):
    """The same job run from another checkout, or with another engine environment, resumes the same
    sweep: the interpreter's path names where vLLM runs, not what it computes."""
    from pipeline.config.sweep import expand

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
