"""Compaction: same answers from every shipped query, crash safety at each step, idempotence, resume."""

from __future__ import annotations

import errno
import math
import os
from pathlib import Path
from typing import Any

import pytest

from pipeline.analysis.query import connect, list_queries, query_table
from pipeline.core.disk_full import storage_failure
from pipeline.store import compact as compact_module
from pipeline.store.claim import SweepBusyError
from pipeline.store.compact import TMP_PREFIX, compact
from pipeline.store.files import PART_PREFIX
from pipeline.store.inventory import INVENTORY
from pipeline.store.tables import ANALYSIS_TABLES
from pipeline.store.verify import verify_sweep
from tests.pipeline.analysis.builder import SweepBuilder
from tests.pipeline.analysis.conftest import build_scores_sweep
from tests.pipeline.analysis.test_metrics import build_depth_sweep
from tests.pipeline.store.test_claim import another_driver_holds


def _canonical(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 9)
    if isinstance(value, list):
        return tuple(_canonical(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _canonical(v)) for k, v in value.items()))
    return value


def rows_seen(runs: Path) -> dict[str, list[Any]]:
    """Every row of every view, order-free: what every query is computed from (so equal rows mean
    equal answers; test_every_query_gives_the_same_answer_after_compaction checks that too)."""
    with connect(runs) as con:
        return {table: sorted(map(_canonical, con.sql(f"SELECT * FROM {table}").to_arrow_table().to_pylist()), key=repr)
                for table in ANALYSIS_TABLES}


def answers(runs: Path) -> dict[str, list[Any]]:
    """Every shipped query's rows (order-free, floats rounded) plus every table's full contents."""
    with connect(runs) as con:
        out = {name: sorted(map(_canonical, query_table(con, name, baseline="full_context").to_pylist()), key=repr)
               for name in list_queries()}
    return out | rows_seen(runs)


def files(sweep: Path) -> list[str]:
    """The data files (the inventory's records are checked by verify)."""
    return sorted(str(p.relative_to(sweep)) for p in sweep.rglob("*") if p.is_file() and p.parts[len(sweep.parts)] != INVENTORY)


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    build_scores_sweep(tmp_path)
    build_depth_sweep(tmp_path)
    return tmp_path


def test_every_query_gives_the_same_answer_after_compaction(runs: Path) -> None:
    before = answers(runs)
    small = len(files(runs / "sweep-a"))
    report = compact(runs / "sweep-a")
    compact(runs / "sweep-depth")
    assert report.parts_written == report.partitions_compacted > 0
    parquet = [f for f in files(runs / "sweep-a") if f.endswith(".parquet")]
    assert all(Path(f).name.startswith(PART_PREFIX) for f in parquet)
    assert len(parquet) < small / 3
    assert answers(runs) == before


def test_many_files_are_merged_in_rounds_in_order_with_the_same_answers(runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A merge reads at most MERGE_FAN_IN files (its memory grows with them): more go through hidden
    rounds, and the part is the one a single merge writes: same rows, same order, no temporaries left."""
    import pyarrow.parquet as pq

    single = runs.parent / "single"
    build_scores_sweep(single)
    build_depth_sweep(single)
    compact(single / "sweep-a")
    monkeypatch.setattr(compact_module, "MERGE_FAN_IN", 2)
    real_copy, stale = compact_module._copy, []

    def copy(con, table, sources, target, options=""):  # noqa: ANN001, ANN202
        # The last merge reads the last round's temporaries, and finds no earlier round's left.
        if target.name.count("-") == 2 and sources[0].name.startswith(TMP_PREFIX):  # .compact-<time>-<hex>.tmp
            stale.extend(set(target.parent.glob(f"{TMP_PREFIX}*.tmp")) - set(sources))
        real_copy(con, table, sources, target, options)

    monkeypatch.setattr(compact_module, "_copy", copy)
    before = answers(runs)
    report = compact(runs / "sweep-a")
    assert stale == []
    assert report.files_merged > 2 * report.parts_written  # some partition needed rounds
    assert answers(runs) == before
    assert files(runs / "sweep-a") != [] and not any(Path(f).name.startswith(TMP_PREFIX) for f in files(runs / "sweep-a"))
    for part in (runs / "sweep-a").rglob(f"{PART_PREFIX}*.parquet"):
        twin = next((single / "sweep-a" / part.parent.relative_to(runs / "sweep-a")).glob(f"{PART_PREFIX}*.parquet"))
        assert pq.read_table(part).equals(pq.read_table(twin))


def test_a_merge_the_disk_refuses_is_a_storage_failure_naming_its_file(runs: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """DuckDB reports a full disk as its own I/O error: compaction raises it as the ``OSError`` it
    is (errno and file), which the sweep's end reports with what to do; nothing changed."""
    before, layout = answers(runs), files(runs / "sweep-a")
    real_copy = compact_module._copy
    monkeypatch.setattr(compact_module, "_copy", lambda con, table, sources, target, options="": real_copy(
        con, table, sources, Path("/dev/full"), options))  # every write to it fails with ENOSPC
    with pytest.raises(OSError) as raised:
        compact(runs / "sweep-a")
    assert (raised.value.errno, raised.value.filename) == (errno.ENOSPC, "/dev/full")
    assert storage_failure(raised.value) is raised.value
    assert answers(runs) == before and files(runs / "sweep-a") == layout


def test_a_merge_spills_beside_its_part_and_a_crashed_merges_spill_is_removed(runs: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    partition = next((runs / "sweep-a" / "steps").iterdir())
    crashed = partition / f"{TMP_PREFIX}00000000000000000001-deadbeef.spill"
    crashed.mkdir()
    (crashed / "duckdb_temp_storage.tmp").write_bytes(b"spilled")
    settings: list[str] = []
    real_copy = compact_module._copy

    def copy(con, table, sources, target, options=""):  # noqa: ANN001, ANN202
        settings.append(con.execute("SELECT current_setting('temp_directory')").fetchone()[0])
        real_copy(con, table, sources, target, options)

    monkeypatch.setattr(compact_module, "_copy", copy)
    compact(runs / "sweep-a")
    assert not crashed.exists()
    assert settings and all(Path(s).name.startswith(TMP_PREFIX) and Path(s).name.endswith(".spill") and
                            Path(s).parent.parent.parent == runs / "sweep-a" for s in settings)
    assert not any(p.name.endswith(".spill") for p in (runs / "sweep-a").rglob("*"))


def test_compaction_is_idempotent(runs: Path) -> None:
    compact(runs / "sweep-a")
    layout = files(runs / "sweep-a")
    again = compact(runs / "sweep-a")
    assert (again.partitions_compacted, again.files_merged, again.leftovers_removed) == (0, 0, 0)
    assert files(runs / "sweep-a") == layout


def test_new_episodes_after_compaction_are_seen_and_merged(tmp_path: Path) -> None:
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    build_scores_sweep(whole)
    b = build_scores_sweep(resumed)
    compact(b.sweep_dir)
    # a resumed sweep adds episodes after compaction (the same rows in both directories)
    for builder in (SweepBuilder(whole), b):
        builder.episode(method="flowstate", task="C", trial=0, reward=1.0, db=1.0, graded=True,
                        steps=[{"request": 1, "step": 1, "n_proposed_ops": 7}])
    assert rows_seen(resumed) == rows_seen(whole)
    compact(b.sweep_dir)
    assert rows_seen(resumed) == rows_seen(whole)
    assert all(len(list(d.glob("*.parquet"))) == 1 for d in (b.sweep_dir / "steps").iterdir())


def test_unfinished_episode_is_not_merged_and_its_rerun_is_not_duplicated(tmp_path: Path) -> None:
    b = SweepBuilder(tmp_path)
    b.episode(task="A", steps=[{"request": 1, "step": 1, "n_proposed_ops": 1}])
    crashed = b.episode(task="B", steps=[{"request": 1, "step": 1, "n_proposed_ops": 100},
                                         {"request": 1, "step": 2, "n_proposed_ops": 100}], write_episode_row=False)
    compact(b.sweep_dir)
    orphan = b.sweep_dir / "steps" / f"cell={crashed['cell_id']}" / f"{crashed['episode_id']}.parquet"
    assert orphan.exists()  # left for the re-run to overwrite
    b.episode(task="B", steps=[{"request": 1, "step": 1, "n_proposed_ops": 2}])  # the re-run finishes
    with connect(b.sweep_dir) as con:
        assert con.execute("SELECT count(*), sum(n_proposed_ops) FROM steps").fetchall() == [(2, 3)]
    compact(b.sweep_dir)
    with connect(b.sweep_dir) as con:
        assert con.execute("SELECT count(*), sum(n_proposed_ops) FROM steps").fetchall() == [(2, 3)]


def test_crash_before_the_rename_leaves_queries_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = tmp_path
    sweep = build_scores_sweep(runs).sweep_dir
    before = rows_seen(runs)
    layout = files(sweep)
    real_replace = os.replace

    def crash(src: Any, dst: Any) -> None:
        if Path(src).name.startswith(TMP_PREFIX):
            raise KeyboardInterrupt("killed before the rename")
        real_replace(src, dst)

    monkeypatch.setattr(compact_module.os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        compact(sweep)
    monkeypatch.undo()
    assert files(sweep) == layout and verify_sweep(sweep).problems == []  # the unborn part's record is not a loss
    # what a SIGKILL at that moment leaves behind: a half-written temporary
    stale = next((sweep / "steps").iterdir()) / f"{TMP_PREFIX}123.tmp"
    stale.write_bytes(b"half a parquet file")
    assert rows_seen(runs) == before
    report = compact(sweep)
    assert report.leftovers_removed == 2 and not stale.exists()  # the temporary, and the unborn part's record
    assert rows_seen(runs) == before


def test_crash_after_the_rename_leaves_queries_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed between a part's rename and the deletion of its inputs, or half-way through deleting."""
    runs = tmp_path
    sweep = build_scores_sweep(runs).sweep_dir
    before = rows_seen(runs)
    real_unlink = Path.unlink
    deleted = []

    def crash_after_two(self: Path, missing_ok: bool = False) -> None:
        if self.name.endswith(".parquet") and not self.name.startswith(PART_PREFIX):
            if len(deleted) == 2:
                raise KeyboardInterrupt("killed while deleting merged files")
            deleted.append(self)
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", crash_after_two)
    with pytest.raises(KeyboardInterrupt):
        compact(sweep)
    monkeypatch.undo()
    leftovers = [f for f in files(sweep) if f.endswith(".parquet") and not Path(f).name.startswith(PART_PREFIX)]
    parts = [f for f in files(sweep) if Path(f).name.startswith(PART_PREFIX)]
    assert parts and leftovers  # the part is visible and some merged inputs still exist
    assert rows_seen(runs) == before  # ... yet every row is seen exactly once
    report = compact(sweep)
    assert report.leftovers_removed > 0
    assert not [f for f in files(sweep) if f.endswith(".parquet") and not Path(f).name.startswith(PART_PREFIX)]
    assert rows_seen(runs) == before


def test_recompaction_replaces_parts_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second compaction merging parts: killed after its new part appeared, before the old ones went."""
    runs = tmp_path
    sweep = build_scores_sweep(runs).sweep_dir
    compact(sweep)
    SweepBuilder(runs).episode(method="flowstate", task="C", trial=1, reward=0.0, graded=True,
                               steps=[{"request": 1, "step": 1, "n_proposed_ops": 3}])
    before = rows_seen(runs)
    real_unlink = Path.unlink

    def keep_everything(self: Path, missing_ok: bool = False) -> None:
        if self.name.endswith(".parquet"):
            raise KeyboardInterrupt("killed before deleting anything")
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", keep_everything)
    with pytest.raises(KeyboardInterrupt):
        compact(sweep)
    monkeypatch.undo()
    cell_dirs = [d for d in (sweep / "steps").iterdir() if len(list(d.glob(f"{PART_PREFIX}*"))) > 1]
    assert cell_dirs  # an old part and the new one that replaces it, side by side
    assert rows_seen(runs) == before
    compact(sweep)
    assert rows_seen(runs) == before


def test_no_compaction_while_another_driver_holds_the_sweep(tmp_path: Path) -> None:
    sweep = build_scores_sweep(tmp_path).sweep_dir
    before, layout = rows_seen(sweep), files(sweep)
    with another_driver_holds(sweep), pytest.raises(SweepBusyError, match="held by another driver: run by pid"):
        compact(sweep)
    assert files(sweep) == layout  # nothing was touched while the claim was held
    report = compact(sweep)  # the claim is released
    assert report.parts_written == report.partitions_compacted > 0 and rows_seen(sweep) == before


def test_forgotten_episodes_leave_the_parts_and_their_next_rows_are_read(tmp_path: Path) -> None:
    """What a rerun does before retrying infrastructure failures that compaction already merged."""
    b = SweepBuilder(tmp_path)
    kept = b.episode(task="0", reward=1.0, steps=[{"request": 1, "step": 1}])
    failed = b.episode(task="1", status="failed", reward=None)
    compact(b.sweep_dir)
    assert list((b.sweep_dir / "episodes").glob("*/part-*.parquet"))
    before = rows_seen(b.sweep_dir)
    assert compact_module.forget_episodes(b.sweep_dir, frozenset({failed["episode_id"]})) == 1  # only its episodes part
    after = rows_seen(b.sweep_dir)
    assert [r for r in before["episodes"] if dict(r)["episode_id"] != failed["episode_id"]] == after["episodes"]
    assert after["steps"] == before["steps"] and dict(after["episodes"][0])["episode_id"] == kept["episode_id"]
    b.episode(task="1", reward=1.0)  # the retry's files: visible now, never dropped as leftovers
    compact(b.sweep_dir)
    with connect(b.sweep_dir) as con:
        statuses = con.sql("SELECT task_id, status FROM episodes ORDER BY task_id").fetchall()
    assert statuses == [("0", "completed"), ("1", "completed")]
