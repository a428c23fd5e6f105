"""Sweep expansion and deterministic ids."""

from __future__ import annotations

import random

import pytest

from pipeline.benchmarks.taubench import TAUBENCH
from pipeline.config import JobConfig
from pipeline.sweep import expand, trial_seeds


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

    from pipeline.manifest import write_manifest
    from pipeline.plan import earlier_sweeps, locate_sweep

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

    from pipeline.cli import main
    from pipeline.plan import locate_sweep

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
