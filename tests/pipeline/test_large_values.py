"""A 10 MB tool result and a 10 MB completion: stored in Parquet, shown cut with their sizes, queried by SQL.

The tiny benchmark's lookup (a test fixture) returns 10 MB for one key, and its oracle answers with
what it looked up, so the next completion is 10 MB too. The episodes run in this process (the
actor's body, :class:`EpisodeWorker`: the patched table is this process's).
"""

from __future__ import annotations

import asyncio
import tracemalloc
from pathlib import Path

import pytest
import yaml

from examples import tiny
from pipeline.analysis.query import run_query
from pipeline.cli.main import main
from pipeline.cli.show import load_episode, render
from pipeline.config.job import load_job
from pipeline.config.sweep import expand
from pipeline.run.actors import EpisodeWorker
from pipeline.run.dispatch import start_deployments, stop_deployments
from pipeline.store.compact import compact
from pipeline.store.files import table_files
from pipeline.store.reader import select

BIG = 10 * 2**20
JOB = {"name": "large-values", "plugins": ["examples.tiny"], "benchmarks": [{"benchmark": "tiny", "tasks": ["t1"]}],
       "methods": [{"name": "flowstate"}, {"name": "full_context"}], "agents": [{"deployment": "oracle"}],
       "deployments": {"oracle": {"kind": "scripted", "name": "oracle"}}}


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("large")
    (root / "job.yaml").write_text(yaml.safe_dump(JOB))
    job = load_job(root / "job.yaml")
    sweep = expand(job)
    folder = root / "runs" / sweep.sweep_id
    deployments = start_deployments(job)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(tiny.TABLE, "france", "Paris, " + "x" * (BIG - 7))
        worker = EpisodeWorker(job, folder, deployments, "test")
        for spec in sweep.episodes:
            asyncio.run(worker.run(spec, 1))
    stop_deployments(deployments)
    return folder


def test_they_are_stored_whole_and_queried_by_sql(sweep_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "sizes.sql").write_text(
        "SELECT 'tool' AS what, method, max(length(content)) AS chars FROM transcript WHERE role = 'tool' GROUP BY method "
        "UNION ALL SELECT 'completion', method, max(length(completion)) FROM messages GROUP BY method ORDER BY what, method")
    sizes = run_query(tmp_path / "sizes.sql", sweep_dir).to_pylist()
    assert {(r["what"], r["method"]): r["chars"] >= BIG for r in sizes} == {
        (what, method): True for what in ("tool", "completion") for method in ("flowstate", "full_context")}
    rewards = {r["method"]: r["pass_rate"] for r in run_query("pass_rate", sweep_dir).to_pylist()}
    assert set(rewards) == {"flowstate", "full_context"}  # the shipped queries run over them too


@pytest.mark.parametrize("compacted", [False, True])
def test_show_cuts_them_states_their_size_and_never_holds_one(sweep_dir: Path, compacted: bool,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    if compacted:
        compact(sweep_dir)
    [row] = select(table_files(sweep_dir)["episodes"], "episode_id", "WHERE method = 'full_context'")
    episode = row["episode_id"]
    tracemalloc.start()
    try:
        lines = list(render(load_episode(sweep_dir, episode)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * 2**20  # Python never held a 10 MB value (DuckDB read them and cut them)
    text = "\n".join(lines)
    assert f"({BIG:,} chars)" in text  # the tool result, cut
    assert "model calls:" in text and max(map(len, lines)) < 2_500 and len(text) < 50_000
    assert main(["show", episode[:10], "--runs", str(sweep_dir)]) == 0
    assert capsys.readouterr().out.strip() == text
