"""The store's writer: atomic files, the episodes file last, retries that leave nothing stale."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipeline.store import writer
from pipeline.store.reader import done_episodes
from pipeline.store.writer import WRITE_ORDER, episode_file, write_episode, write_parquet_atomic
from tests.pipeline.analysis.builder import SweepBuilder, table_of


def rows_for(builder: SweepBuilder, tables: tuple[str, ...]) -> tuple[dict, dict[str, list[dict]]]:
    ids = builder.ids(domain="airline", method="m", model="x", task="1", trial=0)
    row = {"steps": {"request": 1, "step": 1}, "transcript": {"seq": 0, "role": "user", "content": "hi"},
           "messages": {"seq": 0, "caller": "agent"}, "request_outcomes": {"request": 1, "correct": True},
           "method_records": {"seq": 0, "kind": "k", "payload_json": "{}"},
           "episodes": {"status": "completed", "termination": "user_stop", "reward": 1.0}}
    return ids, {t: [{**ids, **row[t]}] for t in tables}


def test_every_table_is_written_with_the_episodes_file_last(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written: list[str] = []
    real = writer.write_parquet_atomic
    monkeypatch.setattr(writer, "write_parquet_atomic",
                        lambda path, table, episodes, options: (written.append(path.parts[-3]),
                                                                real(path, table, episodes, options)))
    ids, rows = rows_for(SweepBuilder(tmp_path), WRITE_ORDER)
    write_episode(tmp_path, ids["cell_id"], ids["episode_id"], rows)
    assert written == list(WRITE_ORDER) and written[-1] == "episodes"
    assert done_episodes(tmp_path) == {ids["episode_id"]: "completed"}


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


def test_unknown_tables_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown tables"):
        write_episode(tmp_path, "c", "e", {"stepz": [{}]})
