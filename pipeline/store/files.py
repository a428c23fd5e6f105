"""Which Parquet files hold a sweep's rows, each row once: the one place that knows the file layout.

A table folder holds, per partition ``cell=<cell_id>/``, two kinds of files:

- per-episode files ``<episode_id>.parquet`` written by :mod:`pipeline.store.writer`;
- compacted parts ``part-*.parquet`` written by :mod:`pipeline.store.compact`, whose Parquet
  footer lists the episodes they hold and the older parts they replace.

The visible rows of a table are those of

- every part that no other part of its folder replaces, and
- every per-episode file whose episode has an episodes row (the episodes file is written last, so
  any other file is an unfinished attempt that a re-run will overwrite) and whose episode no visible
  part of its folder already holds (a compaction interrupted after its part appeared).

So a compaction changes what is visible in one atomic step, the rename of its part, and every file
it deletes afterwards is already invisible. Two visible parts hold the same episode only where two
copies of a sweep, compacted apart, were merged into one folder: readers then read the newer part's
rows (:attr:`Partition.other_copies`, :mod:`pipeline.store.copies`).
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import duckdb

from flowstate.errors import FlowStateError
from pipeline.core.commands import flowstate_command
from pipeline.store.inventory import looks_whole, read_record
from pipeline.store.tables import ANALYSIS_TABLES

# The manifest's file name (pipeline.store.manifest.MANIFEST; not imported: that module loads the sweep machinery).
MANIFEST = "manifest.json"
PART_PREFIX = "part-"
PART_META_KEY = "flowstate.compaction"
PARQUET = ".parquet"
# Sweep folders that ``flowstate run --fresh`` moved aside: old results, never read as a sweep.
REPLACED_MARK = ".replaced-"


class NoResultsError(FlowStateError, ValueError):
    """A runs directory without any FlowState results."""


@dataclass(frozen=True)
class Part:
    path: Path
    episodes: frozenset[str]
    replaces: frozenset[str]


def read_parts(paths: list[Path]) -> list[Part]:
    """The compaction records in the footers of ``paths``, read in one pass."""
    if not paths:
        return []
    try:
        rows = _part_records(paths)
    except duckdb.Error:  # a broken part: read them one by one
        rows = {}
        for path in paths:
            try:
                rows.update(_part_records([path]))
            except duckdb.Error:
                continue
    parts = []
    for path in paths:
        meta = json.loads(rows[str(path)]) if str(path) in rows else {"episodes": _recorded_episodes(path)}
        parts.append(Part(path, frozenset(meta.get("episodes", ())), frozenset(meta.get("replaces", ()))))
    return parts


def _recorded_episodes(path: Path) -> list[str]:
    """A part whose footer cannot be read holds what its inventory record says (nothing without one)."""
    record = read_record(path)
    return record.episodes if record is not None else []


def _part_records(paths: list[Path]) -> dict[str, bytes]:
    with duckdb.connect() as con:
        return dict(con.execute("SELECT file_name, value FROM parquet_kv_metadata($files) WHERE decode(key) = $key",
                                {"files": [str(p) for p in paths], "key": PART_META_KEY}).fetchall())


class EpisodeFiles(Mapping[str, Path]):
    """A folder's per-episode files by episode id, each path made when it is asked for (a sweep
    may hold hundreds of thousands, and listing them is what a resume does first)."""

    def __init__(self, directory: Path, episodes: set[str]) -> None:
        self._directory = directory
        self._episodes = episodes

    def __getitem__(self, episode: str) -> Path:
        if episode not in self._episodes:
            raise KeyError(episode)
        return self._directory / f"{episode}{PARQUET}"

    def __contains__(self, episode: object) -> bool:
        return episode in self._episodes

    def __iter__(self) -> Iterator[str]:
        return iter(self._episodes)

    def __len__(self) -> int:
        return len(self._episodes)


@dataclass(frozen=True)
class Partition:
    """One ``<table>/cell=<id>/`` folder."""

    table: str
    directory: Path
    parts: tuple[Part, ...]
    small: EpisodeFiles  # episode id -> per-episode file

    @cached_property
    def _replaced(self) -> frozenset[str]:
        return frozenset(name for part in self.parts for name in part.replaces)

    @cached_property
    def active_parts(self) -> tuple[Part, ...]:
        return tuple(p for p in self.parts if p.path.name not in self._replaced)

    @cached_property
    def superseded_parts(self) -> tuple[Part, ...]:
        return tuple(p for p in self.parts if p.path.name in self._replaced)

    def visible_files(self, done: frozenset[str]) -> list[Path]:
        return [p.path for p in self.active_parts] + list(pending_small(self, done).values())

    @cached_property
    def covered(self) -> frozenset[str]:
        """Episodes held by a visible part (their per-episode files, if any, are leftovers)."""
        return frozenset().union(*(p.episodes for p in self.active_parts))

    @cached_property
    def other_copies(self) -> dict[Path, frozenset[str]]:
        """Per visible part, the episodes a newer visible part also holds: another copy of them,
        which readers leave out. Parts of one folder overlap only when two copies of a sweep,
        compacted apart, were merged into one folder (a part's name starts with the time it was
        written, so the newest copy wins)."""
        if sum(len(p.episodes) for p in self.active_parts) == len(self.covered):
            return {}
        newer: set[str] = set()
        older: dict[Path, frozenset[str]] = {}
        for part in sorted(self.active_parts, key=lambda p: p.path.name, reverse=True):
            if part.episodes & newer:
                older[part.path] = part.episodes & newer
            newer |= part.episodes
        return older


def _listing(directory: Path) -> tuple[list[Path], EpisodeFiles]:
    """(part files, per-episode files by episode id) of one partition folder."""
    parts: list[Path] = []
    small: set[str] = set()
    with os.scandir(directory) as entries:
        for entry in entries:
            name = entry.name
            if not name.endswith(PARQUET) or name.startswith(".") or not entry.is_file():
                continue
            if name.startswith(PART_PREFIX):
                parts.append(Path(entry.path))
            else:
                small.add(name[: -len(PARQUET)])
    return sorted(parts), EpisodeFiles(directory, small)


def done_episodes(by_table: dict[str, list[Partition]]) -> frozenset[str]:
    """Episodes with an episodes row, compacted or not."""
    done: set[str] = set()
    for p in by_table.get("episodes", ()):
        done.update(p.small)
        done.update(p.covered)
    return frozenset(done)


def pending_small(partition: Partition, done: frozenset[str]) -> dict[str, Path]:
    """Visible per-episode files: of finished episodes, not yet held by a part."""
    return {e: f for e, f in partition.small.items() if e in done and e not in partition.covered}


def scan_sweep(sweep_dir: Path) -> tuple[dict[str, list[Partition]], frozenset[str]]:
    """Every partition of every table, and the finished episodes."""
    listings = {
        (table, d): _listing(d)
        for table in ANALYSIS_TABLES if (sweep_dir / table).is_dir()
        for d in sorted((sweep_dir / table).iterdir()) if d.is_dir() and not d.name.startswith(".")
    }
    parts = {p.path: p for p in read_parts([path for paths, _ in listings.values() for path in paths])}
    by_table: dict[str, list[Partition]] = {table: [] for table in ANALYSIS_TABLES}
    for (table, directory), (paths, small) in listings.items():
        by_table[table].append(Partition(table, directory, tuple(parts[p] for p in paths), small))
    return by_table, done_episodes(by_table)


class IncompleteResultsWarning(UserWarning):
    """A reader left out a file that is not a whole Parquet file: what it shows is incomplete."""


def _visible(sweep_dir: Path) -> dict[str, list[Path]]:
    by_table, done = scan_sweep(sweep_dir)
    return {table: [f for p in parts for f in p.visible_files(done)] for table, parts in by_table.items()}


def broken_files(sweep_dir: Path) -> list[Path]:
    """Visible files that are not whole Parquet files (truncated, empty, something else)."""
    return [p for paths in _visible(sweep_dir).values() for p in paths if not looks_whole(p)]


def table_files(sweep_dir: Path) -> dict[str, list[Path]]:
    """Every visible file of each table of one sweep (see the module docstring), but those that are
    not whole Parquet files, each left out with an :class:`IncompleteResultsWarning`."""
    return {table: whole_files(paths) for table, paths in _visible(sweep_dir).items()}


def whole_files(paths: list[Path]) -> list[Path]:
    """``paths`` but those that are not whole Parquet files, each left out with an
    :class:`IncompleteResultsWarning`."""
    broken = [p for p in paths if not looks_whole(p)]
    for path in broken:
        warnings.warn(IncompleteResultsWarning(
            f"left out {path} (not a whole Parquet file): results are incomplete; `{flowstate_command('verify')}` "
            f"lists what it held, `{flowstate_command('run')}` of the job runs it again"), stacklevel=3)
    return [p for p in paths if p not in broken] if broken else paths


def is_sweep_dir(path: Path) -> bool:
    return (path / MANIFEST).is_file() or any((path / table).is_dir() for table in ANALYSIS_TABLES)


def sweep_dirs(runs_dir: Path) -> list[Path]:
    """``runs_dir`` itself when it is a sweep directory, else the sweep directories directly under it."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        raise NoResultsError(f"{runs_dir}: no such directory")
    if is_sweep_dir(runs_dir):
        return [runs_dir]
    found = [d for d in sorted(runs_dir.iterdir())
             if d.is_dir() and REPLACED_MARK not in d.name and not d.name.startswith(".") and is_sweep_dir(d)]
    if not found:
        raise NoResultsError(
            f"{runs_dir}: no FlowState results here: expected a sweep directory (with manifest.json, "
            "episodes/, steps/, ...) or a folder of them")
    return found
