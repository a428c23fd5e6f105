"""The store's writer: atomic files, the episodes file last, retries that leave nothing stale."""

from __future__ import annotations

import errno
import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from pipeline.core import atomic
from pipeline.store import writer
from pipeline.store.inventory import INVENTORY, FileRecord, read_record, record_path
from pipeline.store.reader import Finished, finished_episodes
from pipeline.store.writer import (
    WRITE_ORDER,
    episode_file,
    remove_orphan_temporaries,
    write_episode,
    write_parquet_atomic,
)
from tests.pipeline.analysis.builder import SweepBuilder, table_of


def rows_for(builder: SweepBuilder, tables: tuple[str, ...]) -> tuple[dict, dict[str, list[dict]]]:
    ids = builder.ids(domain="airline", method="m", model="x", task="1", trial=0)
    row = {"steps": {"request": 1, "step": 1}, "transcript": {"seq": 0, "role": "user", "content": "hi"},
           "messages": {"seq": 0, "caller": "agent"}, "request_outcomes": {"request": 1, "correct": True},
           "method_records": {"seq": 0, "kind": "k", "payload_json": "{}"},
           "faults": {"seq": 0, "kind": "server_error", "http_status": 503, "attempt": 1, "retried": True},
           "episodes": {"status": "completed", "termination": "user_stop", "reward": 1.0}}
    return ids, {t: [{**ids, **row[t]}] for t in tables}


def test_every_table_is_written_with_the_episodes_file_last_and_one_record(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    written: list[str] = []
    real = writer.write_bytes_atomic
    monkeypatch.setattr(writer, "write_bytes_atomic",
                        lambda path, data, **options: (written.append(path.parts[-3]), real(path, data, **options)))
    ids, rows = rows_for(SweepBuilder(tmp_path), WRITE_ORDER)
    write_episode(tmp_path, ids["cell_id"], ids["episode_id"], rows)
    assert written == list(WRITE_ORDER) and written[-1] == "episodes"
    assert finished_episodes(tmp_path) == Finished(done=frozenset({ids["episode_id"]}), failed=frozenset())
    # one record file for the episode: its episodes file's, carrying the other six
    [record] = (tmp_path / INVENTORY).rglob("*.json")
    assert record == record_path(episode_file(tmp_path, "episodes", ids["cell_id"], ids["episode_id"]))
    assert sorted(FileRecord.model_validate_json(record.read_bytes()).files or {}) == sorted(WRITE_ORDER[:-1])


def test_an_episode_is_written_with_its_episodes_row(tmp_path: Path) -> None:
    ids, rows = rows_for(SweepBuilder(tmp_path), ("steps",))
    with pytest.raises(ValueError, match="episodes row"):
        write_episode(tmp_path, ids["cell_id"], ids["episode_id"], rows)
    assert not (tmp_path / "steps").exists()


def test_a_retry_with_fewer_tables_removes_the_earlier_attempts_files(tmp_path: Path) -> None:
    ids, rows = rows_for(SweepBuilder(tmp_path), WRITE_ORDER)
    write_episode(tmp_path, ids["cell_id"], ids["episode_id"], rows)
    write_episode(tmp_path, ids["cell_id"], ids["episode_id"], {"episodes": rows["episodes"]})  # e.g. a failure row
    present = {t for t in WRITE_ORDER if episode_file(tmp_path, t, ids["cell_id"], ids["episode_id"]).exists()}
    assert present == {"episodes"}


def test_a_write_that_fails_leaves_the_old_file_and_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "episodes" / "cell=c" / "f.parquet"
    ids, _ = rows_for(SweepBuilder(tmp_path), ())
    write_parquet_atomic(path, table_of("episodes", [{**ids, "status": "completed"}]), ["e"])

    def broken(table, where, **options):  # noqa: ANN001, ANN202
        Path(where).write_bytes(b"PAR1 half a file")
        raise OSError("disk full")

    monkeypatch.setattr(writer.pq, "write_table", broken)
    with pytest.raises(OSError, match="disk full"):
        write_parquet_atomic(path, table_of("episodes", [{**ids, "status": "failed"}]), ["e"])
    monkeypatch.undo()
    assert pq.read_table(path).column("status").to_pylist() == ["completed"]
    assert [p.name for p in path.parent.iterdir()] == ["f.parquet"]


def test_an_episode_file_whose_write_fails_keeps_the_old_file_and_its_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Built in memory and written through one descriptor: a failure part-way (here the disk
    filling up as the bytes go out) leaves the earlier attempt's file, its record, and no temporary."""
    ids, rows = rows_for(SweepBuilder(tmp_path), ("episodes",))
    write_episode(tmp_path, ids["cell_id"], ids["episode_id"], rows)
    path = episode_file(tmp_path, "episodes", ids["cell_id"], ids["episode_id"])
    before, record_before = path.read_bytes(), record_path(path).read_bytes()

    def fills_up(descriptor: int, data: Any) -> None:
        os.write(descriptor, bytes(data)[:10])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic, "_write_all", fills_up)
    with pytest.raises(OSError, match="No space left"):
        writer.write_encoded_atomic(writer.encode_small_parquet(path, table_of("episodes", rows["episodes"] * 2),
                                                                [ids["episode_id"]]))
    monkeypatch.undo()
    assert path.read_bytes() == before and record_path(path).read_bytes() == record_before
    assert [p.name for p in path.parent.iterdir()] == [path.name]
    assert read_record(path) == FileRecord(rows=len(rows["episodes"]), bytes=len(before), files={},
                                           sha256=hashlib.sha256(before).hexdigest(), episodes=[ids["episode_id"]])


KILLED_MID_WRITE = """
import os, sys
from pathlib import Path
from pipeline.core import atomic

def dies(descriptor, data):
    os.write(descriptor, bytes(data)[:10])
    os._exit(9)  # killed half-way through the bytes: no handler runs

atomic._write_all = dies
atomic.write_bytes_atomic(Path(sys.argv[1]), b"PAR1" * 1000)
"""


def test_the_temporary_of_a_write_killed_half_way_is_removed_and_whole_files_stay(tmp_path: Path) -> None:
    ids, rows = rows_for(SweepBuilder(tmp_path), ("steps", "episodes"))
    write_episode(tmp_path, ids["cell_id"], ids["episode_id"], rows)
    whole = episode_file(tmp_path, "steps", ids["cell_id"], ids["episode_id"])
    claim_temporary = tmp_path / ".claim.json.token.tmp"  # another writer's, outside the store's folders
    claim_temporary.write_text("{}")
    cut_short = episode_file(tmp_path, "steps", ids["cell_id"], "another-episode")
    killed = subprocess.run([sys.executable, "-c", KILLED_MID_WRITE, str(cut_short)], cwd=Path(__file__).parents[3])
    assert killed.returncode == 9
    [left] = cut_short.parent.glob(".*.tmp")
    assert left.stat().st_size == 10
    assert remove_orphan_temporaries(tmp_path) == 1
    assert not list((tmp_path / "steps").rglob("*.tmp")) and claim_temporary.exists()
    assert whole.exists() and read_record(whole) is not None


def test_unknown_tables_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown tables"):
        write_episode(tmp_path, "c", "e", {"stepz": [{}]})
