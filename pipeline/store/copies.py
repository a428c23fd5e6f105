"""One copy of each episode, however many a folder of results holds.

Two sweeps that share episode ids (two jobs with the same cells), a sweep copied beside itself
(``cp -r``), or two copies of one sweep merged into one folder hold some episodes more than once;
read as they are, every query would count those episodes once per copy. Readers read each episode
from one copy, every table of it from that copy's files:

- across sweep folders, the copy that holds a result (any status but an infrastructure failure)
  before one that holds a failure, then the copy in the folder whose name sorts first;
- within one folder, where two copies compacted apart and then merged leave two parts that hold the
  same episode, the newest part (:attr:`pipeline.store.files.Partition.other_copies`), table by table.

The rows of the other copies are left out, and readers warn once (:class:`DuplicateResultsWarning`)
with how many episodes had more than one copy and where. ``flowstate verify`` lists them, and
``flowstate compact`` drops a folder's older copies from its parts.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from pipeline.core.commands import flowstate_command
from pipeline.store.files import NoResultsError, pending_small, scan_sweep, sweep_dirs, whole_files
from pipeline.store.inventory import EPISODES_TABLE as EPISODES
from pipeline.store.reader import FAILED
from pipeline.store.tables import ANALYSIS_TABLES


class DuplicateResultsWarning(UserWarning):
    """Some episodes have more than one copy: each was read once (see the module docstring)."""


@dataclass
class TableFiles:
    """One table's visible, whole files in one sweep folder."""

    parts: dict[Path, frozenset[str]]  # compacted parts and the episodes each holds
    small: dict[str, Path]  # per-episode files by episode


@dataclass
class SweepCopy:
    """One sweep folder's files, and the rows in them that are another copy's."""

    sweep_dir: Path
    tables: dict[str, TableFiles]
    left_out: dict[Path, set[str]] = field(default_factory=dict)  # file -> episodes read from another copy

    def held(self) -> set[str]:
        """The episodes read from this copy (those with an episodes row)."""
        files = self.tables[EPISODES]
        read = set().union(*(episodes - self.left_out.get(path, set()) for path, episodes in files.parts.items()))
        return read | {e for e, path in files.small.items() if path not in self.left_out}

    def leave_out(self, episodes: set[str]) -> None:
        """Read these episodes from another copy: leave out their rows here, in every table."""
        for files in self.tables.values():
            for path, held in files.parts.items():
                if held & episodes:
                    self.left_out.setdefault(path, set()).update(held & episodes)
            for episode in episodes & files.small.keys():
                self.left_out[files.small[episode]] = {episode}

    def files(self, table: str) -> list[Path]:
        """The files of ``table`` that hold a row to read."""
        files = self.tables[table]
        return ([p for p, held in files.parts.items() if p not in self.left_out or held - self.left_out[p]]
                + [p for p in files.small.values() if p not in self.left_out])


@dataclass(frozen=True)
class ReadSet:
    """What readers read: per table, the files, and within them the rows of other copies to leave out."""

    files: dict[str, list[Path]]
    left_out: dict[Path, frozenset[str]]  # file -> episodes whose rows in it are another copy's

    def other_copies(self) -> list[tuple[str, str]]:
        """(file, episode id) of every row left out, for the views' ``other_copies`` table."""
        return [(str(path), episode) for path, episodes in self.left_out.items() for episode in sorted(episodes)]

    def files_of(self, table: str, episode: str) -> list[Path]:
        """The files of ``table`` that hold the copy of ``episode`` that is read (and other episodes)."""
        return [f for f in self.files[table] if episode not in self.left_out.get(f, ())]


def sweep_copy(sweep_dir: Path) -> SweepCopy:
    """A sweep folder's visible files (:mod:`pipeline.store.files`), those that are not whole Parquet
    files left out with a warning; a part's episodes that a newer part of its folder also holds are
    left out of it."""
    by_table, done = scan_sweep(sweep_dir)
    copy = SweepCopy(sweep_dir, {})
    for table, partitions in by_table.items():
        parts = {p.path: p.episodes for partition in partitions for p in partition.active_parts}
        small = {e: path for partition in partitions for e, path in pending_small(partition, done).items()}
        whole = set(whole_files([*parts, *small.values()]))
        copy.tables[table] = TableFiles({p: held for p, held in parts.items() if p in whole},
                                        {e: p for e, p in small.items() if p in whole})
        for partition in partitions:
            for path, older in partition.other_copies.items():
                copy.left_out[path] = set(older)
    return copy


def _failed(copy: SweepCopy, episodes: set[str]) -> set[str]:
    """Of ``episodes``, those whose row in this copy is an infrastructure failure."""
    files = copy.tables[EPISODES]
    paths = [p for p, held in files.parts.items() if held & episodes] + [files.small[e] for e in episodes & files.small.keys()]
    with duckdb.connect() as con:
        rows = con.execute("SELECT filename, episode_id FROM read_parquet($files, union_by_name = true, "
                           "hive_partitioning = false, filename = true) WHERE status = $failed",
                           {"files": [str(p) for p in paths], "failed": FAILED}).fetchall()
    return {e for path, e in rows if e in episodes and e not in copy.left_out.get(Path(path), set())}


def _choose(copies: Sequence[SweepCopy], held: Sequence[set[str]]) -> set[str]:
    """Leave out, in every copy but the chosen one, the episodes several copies hold (``held``: by
    each copy; the module docstring's order); returns those episodes."""
    seen: set[str] = set()
    shared: set[str] = set()
    for episodes in held:
        shared |= seen & episodes
        seen |= episodes
    ranked: dict[str, tuple[bool, int]] = {}
    for position, (copy, episodes) in enumerate(zip(copies, held, strict=True)):
        mine = episodes & shared
        failed = _failed(copy, mine) if mine else set()
        for episode in mine:
            rank = (episode in failed, position)
            ranked[episode] = min(ranked.get(episode, rank), rank)
    for position, copy in enumerate(copies):
        copy.leave_out({e for e in held[position] & shared if ranked[e][1] != position})
    return shared


def read_set(sweeps: Iterable[Path]) -> ReadSet:
    """What readers of these sweep folders read: one copy of every episode (the module docstring).
    Warns once when some episodes have more than one copy."""
    copies = [sweep_copy(s) for s in sweeps]
    merged = [set().union(*c.left_out.values()) for c in copies]  # within a folder
    held = [c.held() for c in copies]
    shared = _choose(copies, held)
    duplicated = shared.union(*merged)
    if duplicated:
        where = ", ".join(str(c.sweep_dir) for c, m, h in zip(copies, merged, held, strict=True) if m or h & shared)
        warnings.warn(DuplicateResultsWarning(
            f"{len(duplicated)} episodes have more than one copy ({where}): each is read once, every table from one "
            "copy (a result before an infrastructure failure, then the folder first by name; within a folder, the "
            f"newest compacted part); `{flowstate_command('verify')}` lists them"), stacklevel=2)
    files = {table: [p for c in copies for p in c.files(table)] for table in ANALYSIS_TABLES}
    read = {p for paths in files.values() for p in paths}
    return ReadSet(files, {p: frozenset(e) for c in copies for p, e in c.left_out.items() if p in read})


def runs_read_set(runs_dir: Path) -> ReadSet:
    """:func:`read_set` of every sweep under ``runs_dir``; an error when it holds no finished episode."""
    read = read_set(sweep_dirs(runs_dir))
    if not read.files[EPISODES]:
        raise NoResultsError(f"{runs_dir}: no finished episodes yet (no episodes rows)")
    return read


def shared_episodes(sweeps: Sequence[Path]) -> list[tuple[Path, Path, int]]:
    """Pairs of sweep folders that hold some of the same episodes, and how many."""
    held = [(s, sweep_copy(s).held()) for s in sweeps]
    return [(a, b, len(mine & theirs)) for i, (a, mine) in enumerate(held) for b, theirs in held[i + 1:]
            if mine & theirs]
