"""Merge a sweep's many small per-episode Parquet files into one large part per table and cell.

Crash safety (how :mod:`pipeline.store.files` decides what is visible makes this work):

1. Recover from an earlier interrupted run: delete this module's hidden temporaries, the parts that
   a visible part replaces, and the per-episode files that a visible part already holds. All of these
   are invisible, so deleting them changes no query. Then replace a part that holds episodes a
   newer part also holds (two copies of the sweep merged into one folder) by one without them:
   readers leave those rows out already (:mod:`pipeline.store.copies`), so this changes no query
   either, and no part written afterwards holds an episode twice.
2. Inputs of a partition: its per-episode files of *finished* episodes (those with an episodes row)
   not yet in a part, plus its parts smaller than ``max_part_bytes``. Files of unfinished episodes
   are never merged: a re-run of such an episode overwrites them in place, so its rows cannot appear
   twice, and episodes finishing while compaction runs are simply left for the next compaction.
3. Write the merged rows to a hidden temporary (``.compact-*.tmp``, not matched by ``*.parquet``),
   with the episode ids it holds and the parts it replaces in its footer; fsync it.
4. Rename it to ``part-<time>-<random>.parquet``: the one atomic step. Before it the inputs are what
   queries see; after it the new part is, and the inputs are invisible leftovers.
5. Delete the inputs (a crash here leaves leftovers that step 1 removes next time).

Re-running is idempotent: a partition with no new per-episode files and at most one small part is
left alone. New files of a resumed sweep are merged by the next compaction, and a sweep may keep
writing while it is compacted. Compaction takes the sweep's claim (:mod:`pipeline.store.claim`: the run
that holds it compacts under it), so two compactions of one sweep never run at once, since their
parts would both claim the same episodes.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
from pydantic import BaseModel

from pipeline.core.disk_full import duckdb_os_error
from pipeline.core.fault_injection import crash_point
from pipeline.store.claim import claim_sweep
from pipeline.store.files import PART_META_KEY, PART_PREFIX, Part, Partition, pending_small, scan_sweep
from pipeline.store.inventory import EPISODES_TABLE, episodes_of, forget_file, looks_whole, record_file, records_folder
from pipeline.store.tables import anchor_file

TMP_PREFIX = ".compact-"
DEFAULT_MAX_PART_BYTES = 256 * 2**20
# Files one merge statement reads at most (see _write_part).
MERGE_FAN_IN = 256
MERGE_MEMORY = "512MB"  # DuckDB's buffer memory per merge (see _write_part)


class CompactionReport(BaseModel):
    sweep_dir: Path
    partitions_compacted: int = 0
    files_merged: int = 0
    parts_written: int = 0
    rows_written: int = 0
    leftovers_removed: int = 0
    copies_dropped: int = 0  # episodes whose older copy was dropped (see _drop_older_copies)
    duration_s: float = 0.0


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _literal(text: str) -> str:
    """A SQL string literal: COPY takes its target and footer values only as literals."""
    return "'" + text.replace("'", "''") + "'"


def _recover(partition: Partition) -> int:
    """Step 1 for one partition; returns how many files were removed."""
    leftovers = [p.path for p in partition.superseded_parts]
    leftovers += [f for e, f in partition.small.items() if e in partition.covered]
    leftovers += [partition.directory / n for n in os.listdir(partition.directory) if n.startswith(TMP_PREFIX)]
    for path in leftovers:
        if path.is_dir():  # a merge's spill folder
            shutil.rmtree(path, ignore_errors=True)
        else:
            forget_file(path)
    return len(leftovers) + _forget_unborn_parts(partition)


def _forget_unborn_parts(partition: Partition) -> int:
    """Records of parts a crash kept from appearing (written just before the rename), once every
    episode they would have held is still visible elsewhere in the partition."""
    present = {p.path.name for p in partition.parts}
    visible = partition.covered | set(partition.small)
    removed = 0
    for record in records_folder(partition.directory).glob(f"{PART_PREFIX}*.json"):
        part = partition.directory / f"{record.stem}.parquet"
        if part.name not in present and set(episodes_of(part, True)) <= visible:
            record.unlink(missing_ok=True)
            removed += 1
    return removed


def _write_part(partition: Partition, inputs: list[Path], episodes: set[str], replaces: list[Part],
                exclude: frozenset[str] = frozenset()) -> Path:
    """Steps 3 and 4: merged rows (but those of ``exclude``) -> hidden temporary -> visible part.

    DuckDB writes the file (several threads, zstd). Its memory grows with the number of files one
    statement reads (about half a MiB per per-episode file) and, unless limited, with the rows it
    has read, so more than ``MERGE_FAN_IN`` inputs are merged in rounds through hidden temporaries,
    in order, under ``MERGE_MEMORY``: the end-of-sweep peak barely grows with the sweep's size. A
    round's temporaries go once the next round has merged them (the disk holds at most two rounds'
    copies besides the inputs). A row group larger than the limit is still written (DuckDB goes over
    it rather than fail).
    """
    token = f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}"
    tmp = partition.directory / f"{TMP_PREFIX}{token}.tmp"
    spill = partition.directory / f"{TMP_PREFIX}{token}.spill"  # what does not fit in MERGE_MEMORY
    final = partition.directory / f"{PART_PREFIX}{token}.parquet"
    record = json.dumps({"episodes": sorted(episodes), "replaces": sorted(p.path.name for p in replaces)})
    rounds: list[Path] = []
    try:
        with duckdb.connect() as con:
            con.execute("SET enable_progress_bar = false")
            con.execute(f"SET memory_limit = '{MERGE_MEMORY}'")
            con.execute(f"SET temp_directory = {_literal(str(spill))}")  # DuckDB's default: ./.tmp, wherever that is
            con.execute("SET VARIABLE compact_exclude = $ids::VARCHAR[]", {"ids": sorted(exclude)})
            sources = inputs
            while len(sources) > MERGE_FAN_IN:
                merged = []
                for start in range(0, len(sources), MERGE_FAN_IN):
                    merged.append(partition.directory / f"{TMP_PREFIX}{token}-{len(rounds)}.tmp")
                    _copy(con, partition.table, sources[start:start + MERGE_FAN_IN], merged[-1])
                    rounds.append(merged[-1])
                if sources is not inputs:  # an earlier round's temporaries: merged, so their space is freed now
                    for path in sources:
                        path.unlink()
                sources = merged
            _copy(con, partition.table, sources, tmp, f", KV_METADATA {{{_literal(PART_META_KEY)}: {_literal(record)}}}")
        _fsync(tmp)
        record_file(tmp, final, episodes)
        os.replace(tmp, final)
        _fsync(partition.directory)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        for path in rounds:
            path.unlink(missing_ok=True)
        shutil.rmtree(spill, ignore_errors=True)
    return final


def _copy(con: duckdb.DuckDBPyConnection, table: str, sources: list[Path], target: Path, options: str = "") -> None:
    """One merge: the rows of ``sources`` in order, but the excluded episodes', to ``target``. The
    schema file is read first, so every current column is present and in order; columns a later
    writer added follow."""
    con.execute("SET VARIABLE compact_inputs = $files", {"files": [str(anchor_file(table))] + [str(p) for p in sources]})
    try:
        con.execute(
            "COPY (SELECT * FROM read_parquet(getvariable('compact_inputs'), union_by_name = true, "
            "hive_partitioning = false) WHERE NOT list_contains(getvariable('compact_exclude'), episode_id)) "
            f"TO {_literal(str(target))} (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 8192{options})")
    except duckdb.IOException as exc:  # a full disk is reported as one (pipeline.core.disk_full), with its file
        failure = duckdb_os_error(exc, target)
        if failure is None:
            raise
        raise failure from exc


def compact(sweep_dir: Path | str, *, max_part_bytes: int = DEFAULT_MAX_PART_BYTES) -> CompactionReport:
    """Compact every table of one sweep directory (safe to interrupt, safe to repeat)."""
    sweep_dir = Path(sweep_dir)
    with claim_sweep(sweep_dir, "compact"):  # one writer per sweep (re-entrant for the run that holds it)
        return _compact(sweep_dir, max_part_bytes)


def forget_episodes(sweep_dir: Path | str, episodes: frozenset[str]) -> int:
    """Take these episodes' rows out of the sweep (a rerun retries them: their new rows must be the
    ones read): each compacted part holding one is replaced, atomically, by a part without it, and
    their per-episode files are removed, the episodes table last (cut short, an episode that still
    has its episodes row is still done; one without it is an orphan, whose other rows the next
    resume drops: :func:`pipeline.store.verify.finish_pending_repair`). Returns the parts replaced."""
    sweep_dir = Path(sweep_dir)
    replaced = 0
    with claim_sweep(sweep_dir, "compact"):
        by_table, _ = scan_sweep(sweep_dir)
        # the episodes table last: until its rows go, the episode counts as done and is not re-run
        for table in (*(t for t in by_table if t != "episodes"), "episodes"):
            for partition in by_table[table]:
                for episode in episodes & partition.small.keys():
                    forget_file(partition.small[episode])
                for part in partition.active_parts:
                    drop = part.episodes & episodes
                    if drop:
                        _write_part(partition, [part.path], set(part.episodes - drop), [part], exclude=drop)
                        forget_file(part.path)  # already invisible
                        replaced += 1
    return replaced


def _drop_older_copies(partition: Partition) -> set[str]:
    """Replace each part that holds episodes a newer part of its folder also holds (two copies of the
    sweep, compacted apart, merged into one folder) by a part without them, atomically: what readers
    read already (:attr:`Partition.other_copies`). Returns those episodes."""
    dropped: set[str] = set()
    for part in partition.active_parts:
        older = partition.other_copies.get(part.path)
        if older and looks_whole(part.path):
            if older != part.episodes:  # a part without them replaces it; it is invisible from then on
                _write_part(partition, [part.path], set(part.episodes - older), [part], exclude=older)
            forget_file(part.path)  # nothing of it is read any more
            dropped |= older
    return dropped


def _compact(sweep_dir: Path, max_part_bytes: int) -> CompactionReport:
    started = time.monotonic()
    report = CompactionReport(sweep_dir=sweep_dir)
    by_table, done = scan_sweep(sweep_dir)
    report.leftovers_removed = sum(_recover(p) for parts in by_table.values() for p in parts)
    report.copies_dropped = len(set().union(*(_drop_older_copies(p) for parts in by_table.values() for p in parts)))
    if report.leftovers_removed or report.copies_dropped:
        by_table, done = scan_sweep(sweep_dir)
    # ``done`` is the episodes finished now; episodes finishing from here on wait for the next run.
    # The episodes table last: its per-episode files' records carry the other tables' (inventory).
    for table in sorted(by_table, key=lambda name: name == EPISODES_TABLE):
        for partition in by_table[table]:
            # a broken file is left where it is, for verify and the resume to deal with
            small = {e: f for e, f in pending_small(partition, done).items() if looks_whole(f)}
            mergeable = [p for p in partition.active_parts if p.path.stat().st_size < max_part_bytes and looks_whole(p.path)]
            if not small and len(mergeable) <= 1:
                continue
            episodes = set(small).union(*(p.episodes for p in mergeable))
            inputs = [p.path for p in mergeable] + list(small.values())
            part = _write_part(partition, inputs, episodes, mergeable)
            crash_point("compaction")
            for path in inputs:  # step 5: already invisible
                forget_file(path)
            report.partitions_compacted += 1
            report.files_merged += len(inputs)
            report.parts_written += 1
            report.rows_written += pq.read_metadata(part).num_rows
    report.duration_s = time.monotonic() - started
    return report
