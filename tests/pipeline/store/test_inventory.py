"""Every file accounted for: inventory records written with each file, `flowstate verify`, readers
that leave out a broken file with a warning, and a resume that quarantines and runs again."""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.analysis.query import connect, run_query
from pipeline.analysis.report import build_report
from pipeline.cli.main import main
from pipeline.store.compact import compact
from pipeline.store.files import IncompleteResultsWarning, table_files
from pipeline.store.inventory import INVENTORY, read_record, record_path
from pipeline.store.verify import repair, verify_sweep
from pipeline.store.writer import WRITE_ORDER, episode_file, write_episode
from tests.pipeline.analysis.builder import SweepBuilder
from tests.pipeline.store.test_writer import rows_for


def _sweep(tmp_path: Path, tasks: int = 3) -> SweepBuilder:
    b = SweepBuilder(tmp_path)
    for task in range(tasks):
        b.episode(task=str(task), reward=1.0, steps=[{"request": 1, "step": 1, "n_proposed_ops": task}])
    return b


def _parts(sweep: Path, table: str) -> list[Path]:
    return sorted((sweep / table).glob("*/part-*.parquet"))


def test_each_file_is_recorded_with_its_rows_bytes_hash_and_episode(tmp_path):
    ids, rows = rows_for(SweepBuilder(tmp_path), WRITE_ORDER)
    write_episode(tmp_path, ids["cell_id"], ids["episode_id"], rows)
    for table in WRITE_ORDER:
        path = episode_file(tmp_path, table, ids["cell_id"], ids["episode_id"])
        record = read_record(path)
        assert record is not None and record.episodes == [ids["episode_id"]] and record.rows == 1
        assert (record.bytes, record.sha256) == (path.stat().st_size, hashlib.sha256(path.read_bytes()).hexdigest())
    write_episode(tmp_path, ids["cell_id"], ids["episode_id"], {"episodes": rows["episodes"]})  # a retry, fewer tables
    assert not record_path(episode_file(tmp_path, "steps", ids["cell_id"], ids["episode_id"])).exists()


def test_compaction_records_its_parts_and_drops_the_merged_files_records(tmp_path):
    b = _sweep(tmp_path)
    compact(b.sweep_dir)
    [part] = _parts(b.sweep_dir, "episodes")
    record = read_record(part)
    assert record is not None and len(record.episodes) == 3 and record.rows == 3
    assert sorted(p.name for p in (b.sweep_dir / INVENTORY / "episodes").rglob("*.json")) == [f"{part.stem}.json"]
    result = verify_sweep(b.sweep_dir)
    assert (result.checked, result.unrecorded, result.problems) == (2, 0, [])  # the episodes and steps parts


def test_verify_names_each_bad_or_missing_file_with_its_table_cell_and_episodes(tmp_path, capsys):
    b = _sweep(tmp_path)
    compact(b.sweep_dir)
    [episodes_part] = _parts(b.sweep_dir, "episodes")
    [steps_part] = _parts(b.sweep_dir, "steps")
    held = read_record(episodes_part).episodes
    episodes_part.write_bytes(episodes_part.read_bytes()[:2000])  # truncated, as a disk fault leaves it
    flipped = bytearray(steps_part.read_bytes())
    flipped[len(flipped) // 2] ^= 0xFF  # same size, other bytes
    steps_part.write_bytes(bytes(flipped))
    foreign = b.sweep_dir / "transcript" / "cell=x" / "part-notes.parquet"  # named like a part: visible
    foreign.parent.mkdir(parents=True)
    pq.write_table(pa.table({"note": ["mine"]}), foreign)
    (b.sweep_dir / "episodes" / episodes_part.parent.name / ".stray.parquet.123.tmp").write_bytes(b"half")
    result = verify_sweep(b.sweep_dir)
    reasons = {p.file.name: (p.table, p.cell, p.episodes, p.reason) for p in result.problems}
    assert reasons[episodes_part.name][:3] == ("episodes", episodes_part.parent.name, tuple(held))
    assert "2,000 bytes where" in reasons[episodes_part.name][3]
    assert reasons[steps_part.name][3] == "its SHA-256 differs from the one recorded when it was written"
    assert reasons["part-notes.parquet"][3] == "not a FlowState file (no episode_id column)"
    assert len(result.problems) == 3  # the stray temporary is invisible, so no problem
    assert main(["verify", str(b.sweep_dir)]) == 1
    out = capsys.readouterr()
    assert "3 bad or missing" in out.out and f"held {len(held)} episodes" in out.out and "quarantine" in out.err


def test_a_lost_part_is_missing_but_an_unborn_one_is_not(tmp_path):
    b = _sweep(tmp_path)
    compact(b.sweep_dir)
    [part] = _parts(b.sweep_dir, "episodes")
    part.unlink()  # lost: its record stays, nothing holds its episodes
    [problem] = verify_sweep(b.sweep_dir).problems
    assert (problem.file, problem.reason, len(problem.episodes)) == (part, "missing", 3)


def test_readers_leave_out_a_broken_file_with_one_warning_and_no_traceback(tmp_path, capsys):
    b = _sweep(tmp_path)
    b.episode(task="9", reward=0.0)
    [broken] = [episode_file(b.sweep_dir, "episodes", r["cell_id"], r["episode_id"])
                for r in [b.ids(domain="airline", method="full_context", model="m1", task="9", trial=0)]]
    broken.write_bytes(broken.read_bytes()[:100])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        files = table_files(b.sweep_dir)
        [row] = run_query("pass_rate", b.sweep_dir).to_pylist()
    assert broken not in files["episodes"] and row["episodes"] == 3 and row["pass_rate"] == 1.0
    assert any(issubclass(w.category, IncompleteResultsWarning) and str(broken) in str(w.message) for w in caught)
    with pytest.warns(IncompleteResultsWarning, match="results are incomplete"):
        assert main(["query", "pass_rate", "--runs", str(b.sweep_dir), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["episodes"] == 3
    with pytest.warns(IncompleteResultsWarning):
        report = build_report(b.sweep_dir, tmp_path / "report.md")
    assert f"**Incomplete**: 1 files that are not whole Parquet files were left out (`{broken}`)" in (
        report.markdown.read_text())
    # what a user sees of it: one line, no source location
    assert warnings.formatwarning(IncompleteResultsWarning("left out f"), IncompleteResultsWarning, "x.py", 1) == (
        "flowstate: warning: left out f\n")


def test_repair_quarantines_bad_files_and_takes_their_episodes_out_of_every_table(tmp_path):
    b = _sweep(tmp_path)
    compact(b.sweep_dir)
    b.episode(task="7", reward=1.0, steps=[{"request": 1, "step": 1}])  # after compaction: a per-episode file
    [part] = _parts(b.sweep_dir, "episodes")
    held = set(read_record(part).episodes)
    part.write_bytes(part.read_bytes()[:500])
    moved = repair(b.sweep_dir, verify_sweep(b.sweep_dir))
    assert [p.relative_to(b.sweep_dir).parts[0] for p in moved] == ["quarantine"] and moved[0].with_suffix(".json").exists()
    assert verify_sweep(b.sweep_dir).problems == []
    with connect(b.sweep_dir) as con:
        steps = [r[0] for r in con.sql("SELECT episode_id FROM steps").fetchall()]
    assert held.isdisjoint(steps) and len(steps) == 1  # the held episodes' steps went too; task 7's stayed


def test_a_missing_part_names_only_the_episodes_it_alone_held_and_is_not_reported_again(tmp_path):
    b = _sweep(tmp_path)
    compact(b.sweep_dir)
    [part] = _parts(b.sweep_dir, "steps")
    held = read_record(part).episodes
    part.unlink()
    verification = verify_sweep(b.sweep_dir)
    [problem] = verification.problems
    assert (problem.table, problem.reason, sorted(problem.episodes)) == ("steps", "missing", sorted(held))
    repair(b.sweep_dir, verification)
    assert verify_sweep(b.sweep_dir).problems == []  # its record went with the repair
    assert not (b.sweep_dir / "quarantine" / "pending.json").exists()
    with connect(b.sweep_dir) as con:  # the episodes whose steps were lost are to run again
        assert con.sql("SELECT count(*) FROM episodes").fetchall() == [(0,)]


def test_a_deleted_partition_folder_is_missing_too(tmp_path):
    import shutil

    b = _sweep(tmp_path)
    compact(b.sweep_dir)
    [part] = _parts(b.sweep_dir, "steps")
    shutil.rmtree(part.parent)
    [problem] = verify_sweep(b.sweep_dir).problems
    assert problem.reason == "missing (its folder too)" and len(problem.episodes) == 3


def test_a_repair_cut_short_is_finished_and_orphan_rows_are_dropped_before_a_resume(tmp_path):
    from pipeline.store.verify import finish_pending_repair, orphans

    b = _sweep(tmp_path)
    compact(b.sweep_dir)
    done = read_record(_parts(b.sweep_dir, "episodes")[0]).episodes
    (b.sweep_dir / "quarantine").mkdir()
    (b.sweep_dir / "quarantine" / "pending.json").write_text(json.dumps(done[:1]))  # a journal left by a kill
    b.episode(task="8", reward=1.0, steps=[{"request": 1, "step": 1}], write_episode_row=False)  # a killed episode
    [episodes_part] = _parts(b.sweep_dir, "episodes")
    lost = read_record(episodes_part).episodes[-1]
    rest = [e for e in done[1:] if e != lost]
    # the episodes part loses one episode's row (a cut-short forget): its steps rows are orphans
    from pipeline.store.compact import _write_part
    from pipeline.store.files import scan_sweep
    from pipeline.store.inventory import forget_file

    by_table, _ = scan_sweep(b.sweep_dir)
    [partition] = by_table["episodes"]
    [part] = partition.active_parts
    _write_part(partition, [part.path], set(part.episodes) - {lost}, [part], exclude=frozenset({lost}))
    forget_file(part.path)
    assert orphans(b.sweep_dir) == {lost}  # the killed episode's own files are not orphans
    finish_pending_repair(b.sweep_dir)
    with connect(b.sweep_dir) as con:
        kept = {r[0] for r in con.sql("SELECT episode_id FROM steps").fetchall()}
        episodes = {r[0] for r in con.sql("SELECT episode_id FROM episodes").fetchall()}
    assert kept == episodes == set(rest) and orphans(b.sweep_dir) == set()
    assert not (b.sweep_dir / "quarantine" / "pending.json").exists()


def test_a_broken_part_nobody_recorded_is_named_not_guessed(tmp_path):
    from pipeline.store.verify import RepairError

    b = _sweep(tmp_path)
    compact(b.sweep_dir)
    [part] = _parts(b.sweep_dir, "steps")
    record_path(part).unlink()  # as written before the inventory
    part.write_bytes(part.read_bytes()[:300])
    with pytest.raises(RepairError, match="written before the inventory, so which episodes it held is unknown"):
        repair(b.sweep_dir, verify_sweep(b.sweep_dir))
    assert part.exists()  # nothing moved


def test_a_rewrite_that_fails_keeps_the_files_record(tmp_path, monkeypatch):
    from pipeline.core import atomic
    from pipeline.store.writer import write_parquet_atomic

    b = _sweep(tmp_path, tasks=1)
    path = next((b.sweep_dir / "episodes").rglob("*.parquet"))
    before = record_path(path).read_bytes()

    def killed(src, dst):
        raise KeyboardInterrupt("killed before the rename")

    monkeypatch.setattr(atomic.os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        write_parquet_atomic(path, pq.read_table(path).slice(0, 0), [path.stem])
    monkeypatch.undo()
    assert record_path(path).read_bytes() == before and verify_sweep(b.sweep_dir).problems == []


def test_compaction_leaves_a_broken_file_for_verify_and_the_resume(tmp_path):
    b = _sweep(tmp_path)
    broken = next((b.sweep_dir / "steps").rglob("*.parquet"))
    broken.write_bytes(broken.read_bytes()[:50])
    report = compact(b.sweep_dir)  # no traceback: the other files are merged
    assert report.parts_written >= 1 and broken.exists()
    [problem] = verify_sweep(b.sweep_dir).problems
    assert problem.file == broken


def _written_episode(tmp_path: Path) -> tuple[dict, Path]:
    """One finished episode as an actor writes it (every table; one record, carried by the episodes file's)."""
    ids, rows = rows_for(SweepBuilder(tmp_path), WRITE_ORDER)
    write_episode(tmp_path, ids["cell_id"], ids["episode_id"], rows)
    return ids, episode_file(tmp_path, "steps", ids["cell_id"], ids["episode_id"])


def test_a_file_that_its_episodes_record_carries_is_checked_and_missed_like_any_other(tmp_path):
    import shutil

    ids, steps = _written_episode(tmp_path)
    result = verify_sweep(tmp_path)
    assert (result.checked, result.unrecorded, result.problems) == (len(WRITE_ORDER), 0, [])
    flipped = bytearray(steps.read_bytes())
    flipped[len(flipped) // 2] ^= 0xFF
    steps.write_bytes(bytes(flipped))
    [problem] = verify_sweep(tmp_path).problems
    assert (problem.table, problem.file, problem.episodes) == ("steps", steps, (ids["episode_id"],))
    assert problem.reason == "its SHA-256 differs from the one recorded when it was written"
    steps.unlink()
    [problem] = verify_sweep(tmp_path).problems
    assert (problem.file, problem.reason, problem.episodes) == (steps, "missing", (ids["episode_id"],))
    shutil.rmtree(episode_file(tmp_path, "messages", ids["cell_id"], ids["episode_id"]).parent)
    assert {(p.table, p.reason) for p in verify_sweep(tmp_path).problems} == {
        ("steps", "missing"), ("messages", "missing (its folder too)")}
    repair(tmp_path, verify_sweep(tmp_path))  # the episode is taken out (to run again): its record with it
    assert verify_sweep(tmp_path).problems == [] and not list((tmp_path / INVENTORY).rglob("*.json"))


def test_compaction_merges_the_carried_files_before_the_episodes_file_that_carries_them(tmp_path):
    ids, steps = _written_episode(tmp_path)
    compact(tmp_path)
    assert not steps.exists()
    records = sorted(p.parent.parent.name for p in (tmp_path / INVENTORY).rglob("*.json"))
    assert records == sorted(WRITE_ORDER)  # one per part, the episode's own record gone with its file
    result = verify_sweep(tmp_path)
    assert (result.checked, result.unrecorded, result.problems) == (len(WRITE_ORDER), 0, [])


def test_an_episodes_file_rewritten_in_place_goes_on_carrying_its_episodes_files(tmp_path):
    from pipeline.store.writer import write_parquet_atomic

    ids, steps = _written_episode(tmp_path)
    path = episode_file(tmp_path, "episodes", ids["cell_id"], ids["episode_id"])
    write_parquet_atomic(path, pq.read_table(path), [ids["episode_id"]])  # as a regrade rewrites it
    assert read_record(steps) is not None and verify_sweep(tmp_path).problems == []


def test_a_record_of_its_own_that_an_earlier_writer_left_goes_when_the_file_is_written_again(tmp_path):
    from pipeline.store.writer import write_parquet_atomic

    ids, steps = _written_episode(tmp_path)
    write_parquet_atomic(steps, pq.read_table(steps).slice(0, 0), [ids["episode_id"]])  # e.g. written by older code
    assert record_path(steps).exists() and read_record(steps).rows == 0
    _written_episode(tmp_path)  # the episode run again
    assert not record_path(steps).exists() and read_record(steps).rows == 1
    assert verify_sweep(tmp_path).problems == []
