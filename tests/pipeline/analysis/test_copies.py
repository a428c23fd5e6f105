"""An episode with more than one copy under a runs folder is read once, every table of it from the
same copy, by every reader: each shipped query, ``show``, ``report``, ``track``; ``verify`` lists the
copies and ``compact`` writes none of them twice. Checked against the single copy, on the session's
oracle sweep copied beside itself (two folders) and merged into itself (one folder, two copies
compacted apart)."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from mlflow import MlflowClient

from pipeline.analysis.catalog import list_queries
from pipeline.analysis.query import connect, job_baseline, resolve_baseline, run_query
from pipeline.analysis.report import build_report
from pipeline.cli.main import main
from pipeline.cli.show import load_episode
from pipeline.store.copies import DuplicateResultsWarning
from pipeline.store.files import scan_sweep
from pipeline.store.inventory import INVENTORY
from pipeline.tracking.digest import incidental
from pipeline.tracking.mlflow_log import CELL_TAG, PARENT_TAG, log_sweep, shipped_results


def _normal(value: Any) -> Any:
    """Floats to 9 significant digits: DuckDB sums in no fixed order."""
    if isinstance(value, float):
        return float(f"{value:.9g}")
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


def readers_see(runs: Path, episodes: list[str], tmp: Path) -> dict[str, Any]:
    """Every shipped query's rows (the job's baseline), ``show`` of ``episodes``, and the report's
    tables over ``runs``."""
    with connect(runs) as con:
        results = shipped_results(con, resolve_baseline(con, job_baseline(runs)))
    seen: dict[str, Any] = {name: sorted((_normal(r) for r in table.to_pylist()),
                                         key=lambda r: json.dumps(r, sort_keys=True, default=str))
                            for name, table in results.items()}
    assert set(seen) == set(list_queries())
    for episode in episodes:
        seen[f"show {episode}"] = _normal(load_episode(runs, episode))
    text = build_report(runs, tmp / f"report-{len(list(tmp.iterdir()))}.md").markdown.read_text()
    seen["report"] = text[text.index("\n## "):]  # after the header, which names the folders
    return seen


def episode_ids(sweep: Path) -> list[str]:
    return sorted(e for e in scan_sweep(sweep)[1])


def compacted_apart(sweep: Path, into: Path) -> None:
    """Merge into ``into`` (``cp -r copy/. into/``) a copy of ``sweep`` whose parts hold the same rows
    under newer names, as if that copy had been compacted on its own, later."""
    copy = into.parent / f"{into.name}-other-copy"
    shutil.copytree(sweep, copy)
    for part in sorted(copy.glob("*/cell=*/part-*.parquet")):
        if part.parts[-3] == INVENTORY:
            continue
        renamed = part.with_name(f"part-{time.time_ns():020d}-0copy000.parquet")
        os.rename(part, renamed)
        record = copy / INVENTORY / part.parent.parent.name / part.parent.name / f"{part.stem}.json"
        os.rename(record, record.with_name(f"{renamed.stem}.json"))
    shutil.copytree(copy, into, dirs_exist_ok=True)
    shutil.rmtree(copy)


def cell_metrics(sweep: Path, experiment: str) -> dict[str, dict[str, float]]:
    result = log_sweep(sweep, experiment=experiment)
    client = MlflowClient()
    children = client.search_runs([result.experiment_id], f"tags.`{PARENT_TAG}` = '{result.parent_run_id}'")
    return {c.data.tags[CELL_TAG]: {k: v for k, v in c.data.metrics.items() if not incidental(k)} for c in children}


@pytest.fixture
def single(oracle_sweep: Path, tmp_path: Path) -> Path:
    shutil.copytree(oracle_sweep, tmp_path / "single" / oracle_sweep.name)
    return tmp_path / "single" / oracle_sweep.name


@pytest.fixture(scope="module")
def expected(oracle_sweep: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What readers see of the single copy (they write nothing into it)."""
    return readers_see(oracle_sweep, episode_ids(oracle_sweep)[:2], tmp_path_factory.mktemp("reports"))


def test_a_sweep_copied_beside_itself_is_read_once(single: Path, expected: dict[str, Any], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    shutil.copytree(single, runs / single.name)
    shutil.copytree(single, runs / f"{single.name}-copy")  # cp -r
    (tmp_path / "reports").mkdir()
    assert {r["k"] for r in expected["pass_hat_k"]} == {1}  # a one-trial sweep
    with pytest.warns(DuplicateResultsWarning, match=f"8 episodes have more than one copy \\({runs / single.name}, "):
        assert readers_see(runs, episode_ids(single)[:2], tmp_path / "reports") == expected

    assert main(["verify", str(runs)]) == 0  # every file is as written; the copies are listed
    assert (f"{single.name} and {single.name}-copy hold 8 of the same episodes (a copied sweep, or jobs that share "
            "cells)") in capsys.readouterr().out


def test_two_copies_merged_into_one_folder_are_read_once_and_compacted_once(
        single: Path, expected: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # MLflow's artifacts of a new experiment go under the working directory
    merged = tmp_path / "merged" / single.name
    shutil.copytree(single, merged)
    compacted_apart(single, merged)
    (tmp_path / "reports").mkdir()
    with pytest.warns(DuplicateResultsWarning, match="8 episodes have more than one copy"):
        assert readers_see(merged, episode_ids(single)[:2], tmp_path / "reports") == expected
        assert cell_metrics(merged, "copies-merged") == cell_metrics(single, "copies-single")

    assert main(["verify", str(merged)]) == 1
    out = capsys.readouterr().out
    assert "all as written; 16 parts hold episodes a newer part holds too" in out
    assert "its episodes are also in a newer part (two copies of the sweep merged into one folder?)" in out

    assert main(["compact", str(merged)]) == 0
    assert "the older copy of 8 episodes dropped" in capsys.readouterr().out
    for table, partitions in scan_sweep(merged)[0].items():
        for partition in partitions:
            held = [e for part in partition.active_parts for e in part.episodes]
            assert len(held) == len(set(held)), (table, partition.directory)
        rows = sum(pq.read_metadata(p.path).num_rows for partition in partitions for p in partition.active_parts)
        assert rows == sum(pq.read_metadata(p.path).num_rows for partition in scan_sweep(single)[0][table]
                           for p in partition.active_parts), table
    assert main(["verify", str(merged)]) == 0
    assert run_query("pass_hat_k", merged).to_pylist() == run_query("pass_hat_k", single).to_pylist()


def _edit(sweep: Path, table: str, episode: str, **changes: Any) -> None:
    """Change the rows of ``episode`` in the part of ``table`` that holds them."""
    [part] = [p.path for partition in scan_sweep(sweep)[0][table] for p in partition.active_parts if episode in p.episodes]
    stored = pq.read_table(part)
    rows = [{**r, **changes} if r["episode_id"] == episode else r for r in stored.to_pylist()]
    pq.write_table(pa.Table.from_pylist(rows, schema=stored.schema), part)


def test_every_table_of_an_episode_comes_from_the_copy_read(single: Path, tmp_path: Path) -> None:
    """Two folders that differ: in the one first by name, episode X is an infrastructure failure; in the
    other it has a result. X is read from the other, every table of it; any other episode from the first."""
    runs = tmp_path / "runs"
    first, second = runs / "a-sweep", runs / "b-sweep"
    shutil.copytree(single, first)
    shutil.copytree(single, second)
    x, y = episode_ids(single)[:2]
    _edit(first, "episodes", x, status="failed", reward=None, success=None, termination="infrastructure_error")
    for sweep, label in ((first, "a"), (second, "b")):
        for episode in (x, y):
            _edit(sweep, "steps", episode, assistant_message=f"copy {label}")
            _edit(sweep, "transcript", episode, content=f"copy {label}")

    with pytest.warns(DuplicateResultsWarning, match="8 episodes have more than one copy"):
        shown = {e: load_episode(runs, e) for e in (x, y)}
        passed = run_query("pass_rate", runs).to_pylist()
    assert shown[x]["episodes"][0]["status"] == "completed"
    assert {s["assistant_message"] for s in shown[x]["steps"]} == {"copy b"}
    assert {t["content"] for t in shown[x]["transcript"]} == {"copy b"}
    assert {s["assistant_message"] for s in shown[y]["steps"]} == {"copy a"}
    assert {t["content"] for t in shown[y]["transcript"]} == {"copy a"}
    assert sum(r["episodes"] for r in passed) == 8 and sum(r["failed"] for r in passed) == 0
