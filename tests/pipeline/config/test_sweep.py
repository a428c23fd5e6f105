"""Sweep expansion and deterministic ids."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.benchmarks.base import benchmark_of
from pipeline.benchmarks.taubench import TAUBENCH
from pipeline.config.job import JobConfig
from pipeline.config.sweep import EpisodeIds, _cell, _method_roles, expand, model_identity, trial_seeds
from pipeline.core.ids import content_hash
from pipeline.core.specs import EpisodeSpec


def job(**overrides) -> JobConfig:
    data = {
        "name": "t",
        "benchmarks": [{"benchmark": "taubench", "domain": "airline", "tasks": ["0", "1", "2"], "reward_basis": "classic"},
                       {"benchmark": "taubench", "domain": "retail", "limit": 2, "reward_basis": "classic"}],
        "methods": [{"name": "flowstate"}, {"name": "full_context"}],
        "agents": [{"deployment": "oracle"}],
        "user_simulator": "scripted", "judge": "none",
        "deployments": {"oracle": {"kind": "scripted", "name": "oracle"}},
        "trials": 2,
    }
    data.update(overrides)
    return JobConfig.model_validate(data)


def test_cells_and_episodes_are_the_full_product():
    sweep = expand(job())
    assert [c.label for c in sweep.cells] == [
        "taubench.airline.flowstate.oracle", "taubench.airline.full_context.oracle",
        "taubench.retail.flowstate.oracle", "taubench.retail.full_context.oracle"]
    assert len(sweep.episodes) == (3 + 2) * 2 * 2
    assert len({e.episode_id for e in sweep.episodes}) == len(sweep.episodes)
    assert [e.task_id for e in sweep.episodes if e.cell.label.startswith("taubench.retail")][:4] == ["0", "0", "1", "1"]


def test_trial_seeds_follow_upstream():
    rng = random.Random(300)
    assert trial_seeds(300, 3) == [rng.randint(0, 1_000_000) for _ in range(3)]
    assert {e.seed for e in expand(job()).episodes} == set(trial_seeds(300, 2))


def test_ids_are_stable_and_ignore_execution_settings():
    a, b = expand(job()), expand(job(execution={"concurrency": 3}, output_dir="elsewhere", description="x"))
    assert a.sweep_id == b.sweep_id and [e.episode_id for e in a.episodes] == [e.episode_id for e in b.episodes]
    assert a.sweep_id.startswith("t-")


@pytest.mark.parametrize("change", [
    {"agents": [{"deployment": "oracle", "sampling": {"temperature": 0.7}}]},
    {"seed": 1},
    {"limits": {"max_steps_per_request": 5}},
])
def test_what_defines_results_changes_the_ids(change):
    base, changed = expand(job()), expand(job(**change))
    assert base.sweep_id != changed.sweep_id
    assert not {e.episode_id for e in base.episodes} & {e.episode_id for e in changed.episodes}


def test_a_method_option_changes_only_that_methods_episodes():
    base = expand(job())
    changed = expand(job(methods=[{"name": "flowstate", "rejection_feedback": True}, {"name": "full_context"}]))
    ids = lambda sweep, method: {e.episode_id for e in sweep.episodes if e.cell.method.name == method}  # noqa: E731
    assert not ids(base, "flowstate") & ids(changed, "flowstate")
    assert ids(base, "full_context") == ids(changed, "full_context")


def test_adding_a_method_keeps_the_ids_of_existing_cells():
    base = expand(job(methods=[{"name": "flowstate"}]))
    more = expand(job())
    assert {e.episode_id for e in base.episodes} <= {e.episode_id for e in more.episodes}


def test_data_checksums_are_part_of_episode_ids(monkeypatch):
    before = expand(job())
    real = type(TAUBENCH).data_checksums
    monkeypatch.setattr(TAUBENCH, "data_checksums", lambda cell: {
        **real(TAUBENCH, cell), **({"taubench/airline/db.json": "0" * 64} if cell.domain == "airline" else {})})
    after = expand(job())
    assert before.sweep_id == after.sweep_id  # the job did not change ...
    changed = {e.episode_id for e in before.episodes} ^ {e.episode_id for e in after.episodes}
    assert len(changed) == 2 * 3 * 2 * 2  # ... but every airline episode reads different data


def test_unknown_task_ids_are_an_error():
    with pytest.raises(ValueError, match=r"no tasks \['999'\]"):
        expand(job(benchmarks=[{"benchmark": "taubench", "domain": "airline", "tasks": ["999"], "reward_basis": "classic"}]))


def test_a_changed_job_names_its_earlier_sweep_and_what_differs(tmp_path):
    """Editing a job file gives a new sweep id: the run says so, naming the old sweep."""
    import yaml

    from pipeline.run.manifest import write_manifest
    from pipeline.run.plan import earlier_sweeps, locate_sweep

    job = {"name": "edited", "benchmarks": [{"benchmark": "taubench", "domain": "airline", "tasks": ["0"]}],
           "methods": [{"name": "flowstate"}], "agents": [{"deployment": "oracle"}], "user_simulator": "scripted",
           "deployments": {"oracle": {"kind": "scripted", "name": "oracle"}}, "execution": {"concurrency": 2}}
    path = tmp_path / "edited.yaml"
    path.write_text(yaml.safe_dump(job))
    old_sweep, old_dir = locate_sweep(path, out=tmp_path / "runs")
    write_manifest(old_sweep, old_dir, job_path=path)
    path.write_text(yaml.safe_dump({**job, "trials": 2, "execution": {"concurrency": 4}}))  # concurrency: not a result
    sweep, sweep_dir = locate_sweep(path, out=tmp_path / "runs")
    assert sweep_dir != old_dir
    assert earlier_sweeps(sweep, sweep_dir) == {old_dir: ["trials"]}
    assert earlier_sweeps(old_sweep, old_dir) == {}  # the same sweep is not its own earlier one


def test_another_sweeps_manifest_or_a_broken_one_is_a_clear_error(tmp_path, capsys):
    import yaml

    from pipeline.cli.main import main
    from pipeline.run.plan import locate_sweep

    job = {"name": "mine", "benchmarks": [{"benchmark": "taubench", "domain": "airline", "tasks": ["0"]}],
           "methods": [{"name": "flowstate"}], "agents": [{"deployment": "oracle"}], "user_simulator": "scripted",
           "deployments": {"oracle": {"kind": "scripted", "name": "oracle"}}}
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(job))
    _, sweep_dir = locate_sweep(path, out=tmp_path / "runs")
    sweep_dir.mkdir(parents=True)
    (sweep_dir / "manifest.json").write_text('{"sweep_id": "other-123", "job_name": "other"}')
    assert main(["run", str(path), "--out", str(tmp_path / "runs")]) == 2
    assert "belongs to sweep 'other-123' (job 'other')" in capsys.readouterr().err
    (sweep_dir / "manifest.json").write_text('{"sweep_id": "cut sh')
    assert main(["run", str(path), "--out", str(tmp_path / "runs")]) == 2
    assert "is not a readable manifest" in capsys.readouterr().err
    assert main(["query", "pass_rate", "--runs", str(sweep_dir)]) == 2  # a reader: one line, no traceback
    assert capsys.readouterr().err.startswith("flowstate: error: ")


# -- ids made by splicing equal the definition: each episode's whole config hashed ----------------
def whole_config_ids(job: JobConfig) -> list[str]:
    """Episode ids by their definition (how expand made them before splicing), in sweep order."""
    seeds = trial_seeds(job.seed, job.trials)
    secrets = job.secrets()
    user, judge = model_identity(job, job.user_simulator, secrets), model_identity(job, job.judge, secrets)
    tool = {"tool_model": model_identity(job, job.tool_model, secrets)} if job.tool_model is not None else {}
    ids = []
    for bench in job.benchmarks:
        data = benchmark_of(bench).data_checksums(bench)
        for method in job.methods:
            for agent in job.agents:
                resolved = _cell(job, bench, method, agent, secrets)[1]
                for task in benchmark_of(bench).task_ids(bench):
                    for trial, seed in enumerate(seeds):
                        ids.append(content_hash({
                            "cell": resolved, "task": task, "trial": trial, "seed": seed, "user_simulator": user,
                            "judge": judge, **tool, **_method_roles(job, method, secrets),
                            "limits": job.limits.model_dump(mode="json"), "data": data}))
    return ids


# Keys that sort right before, between and after the spliced ones, and values that spell their marks.
NEAR_KEYS = st.sampled_from(["a", "s", "sed", "seed0", "seeds", "t", "tas", "task0", "tb", "tool_model", "tri",
                             "trial", "trials", "u", "user_simulator", "\x00seed\x00", "é"])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                    st.text(max_size=8), st.sampled_from(["\x00task\x00", "\x00seed\x00", '"trial":', "\\", "Ω"]))
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.one_of(NEAR_KEYS, st.text(max_size=6)), inner, max_size=3), max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(config=st.dictionaries(st.one_of(NEAR_KEYS, st.text(max_size=6)), JSON, max_size=6),
       tasks=st.lists(st.one_of(st.text(max_size=6), st.sampled_from(["\x00trial\x00", '"', "é"])),
                      min_size=1, max_size=4),
       seeds=st.lists(st.integers(0, 1_000_000), min_size=1, max_size=4))
def test_spliced_ids_equal_the_hash_of_each_whole_config(config, tasks, seeds):
    expected = [content_hash({**config, "seed": seed, "task": task, "trial": trial})
                for task in tasks for trial, seed in enumerate(seeds)]
    assert EpisodeIds(config).ids(tasks, seeds) == expected


METHOD_CHOICES = [{"name": "flowstate"}, {"name": "flowstate", "protocol": "json"}, {"name": "full_context"},
                  {"name": "flowstate", "rejection_feedback": True}, {"name": "bm25"}, {"name": "reasoningbank"}]


@st.composite
def jobs(draw: st.DrawFn) -> JobConfig:
    tasks = draw(st.lists(st.sampled_from([str(i) for i in range(12)]), min_size=1, max_size=4, unique=True))
    benchmarks: list[dict[str, Any]] = [{"benchmark": "taubench", "domain": "airline", "tasks": tasks,
                                         "reward_basis": "classic"}]
    if draw(st.booleans()):
        benchmarks.append({"benchmark": "taubench", "domain": "retail", "limit": draw(st.integers(1, 3)),
                           "reward_basis": "classic", "tool_rendering": draw(st.sampled_from(["compact", "full"]))})
    methods = draw(st.lists(st.sampled_from(METHOD_CHOICES), min_size=1, max_size=3, unique_by=str))
    temperatures = draw(st.lists(st.sampled_from([0.0, 0.1, 0.7]), min_size=1, max_size=2, unique=True))
    data: dict[str, Any] = {
        "name": draw(st.sampled_from(["t", "job.b", "x-1"])), "benchmarks": benchmarks, "methods": methods,
        "agents": [{"deployment": "oracle", "label": f"m{i}", "sampling": {"temperature": t}}
                   for i, t in enumerate(temperatures)],
        "user_simulator": "scripted", "judge": "none",
        "deployments": {"oracle": {"kind": "scripted", "name": "oracle"}, "words": {"kind": "wordllama"}},
        "trials": draw(st.integers(1, 4)), "seed": draw(st.integers(0, 10**6)),
        "limits": {"max_steps_per_request": draw(st.integers(1, 40))},
    }
    for role, value in (("tool_model", {"deployment": "oracle"}), ("memory", {"deployment": "oracle"}),
                        ("embeddings", {"deployment": "words"})):
        if draw(st.booleans()) or (role == "embeddings" and {"name": "reasoningbank"} in methods):
            data[role] = value
    return JobConfig.model_validate(data)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(job=jobs())
def test_random_jobs_keep_the_ids_of_their_whole_configs(job):
    sweep = expand(job)
    assert list(sweep.episodes.ids()) == [e.episode_id for e in sweep.episodes] == whole_config_ids(job)


# -- a sweep's episodes are held as ids and built when read ----------------------------------------
def test_episodes_are_built_as_read_and_equal_validated_specs():
    sweep = expand(job(tool_model={"deployment": "oracle"}))
    specs = list(sweep.episodes)
    assert len(sweep.episodes) == len(specs) == 20
    assert sweep.episodes[0] == specs[0] and sweep.episodes[-1] == specs[-1] and sweep.episodes[7] == specs[7]
    with pytest.raises(IndexError):
        sweep.episodes[len(specs)]
    assert [e.episode_id for e in sweep.episodes[3:9]] == [e.episode_id for e in specs[3:9]]
    for spec in specs:  # whole, validated models, as the actors receive them
        assert isinstance(spec, EpisodeSpec) and EpisodeSpec(**dict(spec)) == spec and spec.cell in sweep.cells
        assert spec.sweep_id == sweep.sweep_id and spec.tool_model is not None and spec.tool_model.deployment == "oracle"
    retail = [s for s in specs if s.cell.domain == "retail"]
    assert [(s.task_id, s.trial) for s in retail[:4]] == [("0", 0), ("0", 1), ("1", 0), ("1", 1)]
    assert [s.seed for s in retail[:2]] == trial_seeds(300, 2)


def test_episodes_without_the_done_ones_and_of_one_cell():
    sweep = expand(job())
    specs = list(sweep.episodes)
    done = {specs[i].episode_id for i in (0, 5, 6, 19)}
    todo = sweep.episodes.without(done)
    assert list(todo.ids()) == [s.episode_id for s in specs if s.episode_id not in done]
    assert list(todo) == [s for s in specs if s.episode_id not in done]
    assert todo[-1] == specs[18] and list(todo[1:3]) == specs[2:4]  # specs 0, 5, 6 and 19 are done
    cell = sweep.cells[2]
    assert list(sweep.episodes.of_cell(cell.cell_id)) == [s for s in specs if s.cell == cell]
    assert list(todo.of_cell(sweep.cells[0].cell_id).ids()) == [s.episode_id for s in specs[:6] if s.episode_id not in done]
    assert len(todo.without(set(todo.ids()))) == 0
