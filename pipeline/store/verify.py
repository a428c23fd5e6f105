"""``flowstate verify``: is every file a sweep's readers see the one that was written, and does any
episode have more than one copy?

Each visible file (see :mod:`pipeline.store.files`) is checked against its inventory record
(:mod:`pipeline.store.inventory`): size, SHA-256, footer, row count; a file without a record must at
least be a readable FlowState Parquet file (sweeps written before the inventory have none). A record
whose file is gone while nothing replaced it is a missing file. Each problem names its table, cell
and the episodes the file held, which is what a resumed run quarantines and runs again
(:func:`repair`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path

import pyarrow.parquet as pq

from flowstate.errors import FlowStateError
from pipeline.core.atomic import write_text_atomic
from pipeline.core.commands import flowstate_command
from pipeline.store.files import PARQUET, PART_PREFIX, Partition, scan_sweep
from pipeline.store.inventory import (
    EPISODES_TABLE,
    INVENTORY,
    QUARANTINE,
    FileRecord,
    Problem,
    RecordReader,
    Verification,
    check_file,
    episodes_of,
    forget_file,
    quarantine,
    records_folder,
)

ID_COLUMN = "episode_id"


def verify_sweep(sweep_dir: Path, *, thorough: bool = True) -> Verification:
    """Every visible file against its record (``thorough``: hashed too; otherwise size, footer and
    schema only, what a resume can afford on every start), and every record whose file is gone."""
    started = time.monotonic()
    by_table, done = scan_sweep(sweep_dir)
    partitions = {(table, p.directory.name): p for table, parts in by_table.items() for p in parts}
    result = Verification()
    read_record = RecordReader()
    for cell in sorted({cell for _, cell in partitions}):
        # an episode's files one after another (its episodes file first), so that the record which
        # carries the others' is read once
        files = sorted((path.name, table, path) for table in by_table if (table, cell) in partitions
                       for path in partitions[table, cell].visible_files(done))
        for _, table, path in files:
            result.checked += 1
            record = read_record(path)
            result.unrecorded += record is None
            is_part = path.name.startswith(PART_PREFIX)
            unrecorded = record is None and (thorough or is_part)  # a resume reads parts' schemas only
            reason = check_file(path, record, thorough=thorough) or (_foreign(path) if unrecorded else None)
            if reason:
                result.problems.append(Problem(table, cell, path, episodes_of(path, is_part), reason))
            if record is not None and record.files and table == EPISODES_TABLE and not is_part:
                result.problems += _missing_carried(sweep_dir, cell, path.stem, record.files, partitions)
    for table, parts in by_table.items():
        for partition in parts:
            result.problems += _missing(table, partition, done)
            result.duplicates += [Problem(table, partition.directory.name, path, tuple(sorted(older)),
                                          "its episodes are also in a newer part (two copies of the sweep merged "
                                          "into one folder?): readers read the newer part's rows, and "
                                          f"`{flowstate_command('compact')}` drops these")
                                  for path, older in sorted(partition.other_copies.items())]
        present = {p.directory.name for p in parts}
        for folder in sorted((sweep_dir / INVENTORY / table).glob("cell=*")):  # a whole partition folder gone
            if folder.name not in present:
                result.problems += [Problem(table, folder.name, sweep_dir / table / folder.name / f"{r.stem}{PARQUET}",
                                            tuple(_record_episodes(r)), "missing (its folder too)")
                                    for r in sorted(folder.glob("*.json"))]
    result.duration_s = time.monotonic() - started
    return result


def _missing(table: str, partition: Partition, done: frozenset[str]) -> list[Problem]:
    """Records of files that are gone while what they held is nowhere else in the partition (a part
    a crash kept from appearing, whose episodes are still in their own files, is no loss)."""
    replaced = {name for part in partition.parts for name in part.replaces}
    visible = partition.covered | set(partition.small)
    problems = []
    for record in sorted(records_folder(partition.directory).glob("*.json")):
        data = partition.directory / f"{record.stem}{PARQUET}"
        if data.exists():
            continue
        if data.name.startswith(PART_PREFIX):
            lost = () if data.name in replaced else tuple(e for e in _record_episodes(record) if e not in visible)
        else:  # a finished episode's file that no part holds
            lost = (record.stem,) if record.stem in done and record.stem not in partition.covered else ()
        if lost:
            problems.append(Problem(table, partition.directory.name, data, lost, "missing"))
    return problems


def _missing_carried(sweep_dir: Path, cell: str, episode: str, carried: Mapping[str, FileRecord],
                     partitions: Mapping[tuple[str, str], Partition]) -> list[Problem]:
    """Files of a finished episode that its record carries and that are gone while no part holds them."""
    problems = []
    for table in sorted(carried):
        partition = partitions.get((table, cell))
        if partition is not None and (episode in partition.small or episode in partition.covered):
            continue
        problems.append(Problem(table, cell, sweep_dir / table / cell / f"{episode}{PARQUET}", (episode,),
                                "missing" if partition is not None else "missing (its folder too)"))
    return problems


def _record_episodes(record: Path) -> list[str]:
    try:
        return FileRecord.model_validate_json(record.read_bytes()).episodes
    except (OSError, ValueError):
        return []


def _foreign(path: Path) -> str | None:
    try:
        names = pq.read_schema(path).names
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several kinds for a broken file
        return f"unreadable ({type(exc).__name__})"
    return None if ID_COLUMN in names else "not a FlowState file (no episode_id column)"


class RepairError(FlowStateError, ValueError):
    """A bad file whose episodes nobody recorded: what to run again is unknown."""


JOURNAL = "pending.json"  # under quarantine/: episodes whose rows are being taken out


def repair(sweep_dir: Path, verification: Verification) -> list[Path]:
    """Move the bad files to ``quarantine/`` and take every row of the episodes they held out of the
    sweep, so that a run runs those episodes again; returns where the files went.

    The episodes are journaled before anything moves and the journal is cleared last, so a repair
    cut short is finished by the next one (:func:`finish_pending_repair`)."""
    unknown = [p for p in verification.problems if not p.episodes and p.file.name.startswith(PART_PREFIX)]
    if unknown:
        raise RepairError(f"{unknown[0].file} is bad ({unknown[0].reason}) and was written before the inventory, so "
                          "which episodes it held is unknown: move it out of the sweep by hand and run again "
                          "(the episodes with no episodes row are run again; other tables' rows of them are dropped)")
    journal = sweep_dir / QUARANTINE / JOURNAL
    write_text_atomic(journal, json.dumps(sorted(verification.bad_episodes)))
    moved = []
    for problem in verification.problems:
        if problem.file.exists():
            moved.append(quarantine(sweep_dir, problem.file))
        else:  # missing: its record goes, so it is not reported again
            forget_file(problem.file)
    finish_pending_repair(sweep_dir)
    return moved


def finish_pending_repair(sweep_dir: Path) -> None:
    """Take out the rows of a journaled repair's episodes, then of every orphan (:func:`orphans`: a
    lost episodes part, a cut-short forget), which a run is about to run again, so that its old
    rows do not mix with the new ones."""
    from pipeline.store.compact import forget_episodes

    journal = sweep_dir / QUARANTINE / JOURNAL
    pending = frozenset(json.loads(journal.read_text())) if journal.exists() else frozenset()
    forget_episodes(sweep_dir, pending | orphans(sweep_dir))
    journal.unlink(missing_ok=True)


def orphans(sweep_dir: Path) -> frozenset[str]:
    """Episodes held by compacted parts of other tables but without an episodes row. (Per-episode
    files of an unfinished episode are not orphans: its next attempt overwrites them, and a worker
    of a driver killed a moment ago may still be writing them.)"""
    by_table, done = scan_sweep(sweep_dir)
    held = {e for table, partitions in by_table.items() if table != "episodes" for p in partitions for e in p.covered}
    return frozenset(held - done)
