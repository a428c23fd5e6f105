"""``flowstate verify``: is every file a sweep's readers see the one that was written?

Each visible file (see :mod:`pipeline.store.files`) is checked against its inventory record
(:mod:`pipeline.store.inventory`): size, SHA-256, footer, row count; a file without a record must at
least be a readable FlowState Parquet file (sweeps written before the inventory have none). A record
whose file is gone while nothing replaced it is a missing file. Each problem names its table, cell
and the episodes the file held, which is what a resumed run quarantines and runs again
(:func:`repair`).
"""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow.parquet as pq

from pipeline.store.files import PARQUET, PART_PREFIX, scan_sweep
from pipeline.store.inventory import (
    Problem,
    Verification,
    check_file,
    episodes_of,
    quarantine,
    read_record,
    records_folder,
)

ID_COLUMN = "episode_id"


def verify_sweep(sweep_dir: Path) -> Verification:
    started = time.monotonic()
    by_table, done = scan_sweep(sweep_dir)
    result = Verification()
    for table, partitions in by_table.items():
        for partition in partitions:
            for path in partition.visible_files(done):
                result.checked += 1
                recorded = read_record(path) is not None
                result.unrecorded += not recorded
                reason = check_file(path, thorough=True) or (None if recorded else _foreign(path))
                if reason:
                    result.problems.append(Problem(table, partition.directory.name, path,
                                                   episodes_of(path, path.name.startswith(PART_PREFIX)), reason))
            replaced = {name for part in partition.parts for name in part.replaces}
            for record in sorted(records_folder(partition.directory).glob("*.json")):
                data = partition.directory / f"{record.stem}{PARQUET}"
                if data.exists():
                    continue
                if data.name.startswith(PART_PREFIX):  # not replaced, and what it held is nowhere else
                    held = set(episodes_of(data, True))
                    lost = data.name not in replaced and bool(held - partition.covered - set(partition.small))
                else:  # a finished episode's file that no part holds
                    lost = record.stem in done and record.stem not in partition.covered
                if lost:
                    result.problems.append(Problem(table, partition.directory.name, data,
                                                   episodes_of(data, data.name.startswith(PART_PREFIX)), "missing"))
    result.duration_s = time.monotonic() - started
    return result


def _foreign(path: Path) -> str | None:
    try:
        names = pq.read_schema(path).names
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several kinds for a broken file
        return f"unreadable ({type(exc).__name__})"
    return None if ID_COLUMN in names else "not a FlowState file (no episode_id column)"


def repair(sweep_dir: Path, verification: Verification) -> list[Path]:
    """Move the bad files to ``quarantine/`` and take every row of the episodes they held out of the
    sweep, so that a run runs those episodes again; returns where the files went."""
    from pipeline.analysis.compact import forget_episodes

    moved = [quarantine(sweep_dir, p.file) for p in verification.problems if p.file.exists()]
    if verification.bad_episodes:
        forget_episodes(sweep_dir, verification.bad_episodes)
    return moved
