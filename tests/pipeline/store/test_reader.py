"""What a resume finds done and what it runs again, reading as few files as it can."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.run.rows import failure_rows
from pipeline.store import reader
from pipeline.store.compact import compact
from pipeline.store.files import IncompleteResultsWarning
from pipeline.store.reader import Finished, finished_episodes
from pipeline.store.schema import FAILURE_TABLES
from pipeline.store.writer import write_episode
from tests.pipeline.analysis.builder import SweepBuilder
from tests.pipeline.store.test_rows import SPEC, fault

USER_TURN = [{"seq": 0, "role": "user", "content": "hi"}]


def test_a_failure_writes_only_the_failure_tables():
    """What lets a resume skip opening the files of episodes with rows elsewhere (the writer removes
    an earlier attempt's other files: test_writer)."""
    rows = failure_rows(SPEC, error="endpoint down", attempts=3, code_version="v", faults=[fault(1, 1)])
    assert set(rows) == FAILURE_TABLES and len(rows["faults"]) == 1


def test_a_failure_with_faults_is_read_as_failed(tmp_path: Path) -> None:
    """Its fault rows are rows in another table, and must not make it look finished."""
    sweep_dir = tmp_path / "sweep"
    rows = failure_rows(SPEC, error="endpoint down", attempts=3, code_version="v", faults=[fault(1, 1), fault(2, 1)])
    write_episode(sweep_dir, SPEC.cell.cell_id, SPEC.episode_id, rows)
    assert finished_episodes(sweep_dir) == Finished(done=frozenset(), failed=frozenset({SPEC.episode_id}))


def test_statuses_are_read_from_parts_and_from_the_files_that_may_hold_a_failure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b = SweepBuilder(tmp_path)
    compacted_ok = b.episode(task="3", transcript=USER_TURN)["episode_id"]
    compacted_failed = b.episode(task="4", status="failed")["episode_id"]
    compact(b.sweep_dir)
    ok = b.episode(task="0", transcript=USER_TURN)["episode_id"]
    alone = b.episode(task="1")["episode_id"]  # a result without rows elsewhere (e.g. no request came)
    failed = b.episode(task="2", status="failed")["episode_id"]
    opened: list[Path] = []
    real = reader.select
    monkeypatch.setattr(reader, "select", lambda files, *args: (opened.extend(map(Path, files)), real(files, *args))[1])

    assert finished_episodes(b.sweep_dir) == Finished(done=frozenset({ok, alone, compacted_ok}),
                                                      failed=frozenset({failed, compacted_failed}))
    assert sorted(p.stem for p in opened if not p.name.startswith("part-")) == sorted([alone, failed])
    assert sum(p.name.startswith("part-") for p in opened) == 1  # the episodes table's part


def test_a_broken_file_it_opens_is_left_out_with_a_warning(tmp_path: Path) -> None:
    b = SweepBuilder(tmp_path)
    kept = b.episode(task="0")["episode_id"]
    broken = b.episode(task="1", status="failed")
    path = b.sweep_dir / "episodes" / f"cell={broken['cell_id']}" / f"{broken['episode_id']}.parquet"
    path.write_bytes(path.read_bytes()[:-20])
    with pytest.warns(IncompleteResultsWarning, match=broken["episode_id"]):
        assert finished_episodes(b.sweep_dir) == Finished(done=frozenset({kept}), failed=frozenset())


def test_no_sweep_folder_is_nothing_done(tmp_path: Path) -> None:
    assert finished_episodes(tmp_path / "absent") == Finished(done=frozenset(), failed=frozenset())
