"""Copy-on-write databases and the canonical DB hash (TOOLS.md §1.3–1.4).

Each domain's file is parsed once per process into an :class:`InitialDB` whose records are never
mutated. An episode gets an :class:`EpisodeDB`: per collection, a :class:`Table` that reads
through to the initial records and copies one top-level record (a flight, user, reservation,
order or product) the first time a tool asks to change it. Resetting is therefore O(1) instead
of re-reading or deep-copying megabytes of JSON.

The hash is ``sha256(json.dumps(canonical_db, sort_keys=True))``. That text is the sorted
concatenation of one ``"key": record`` entry per record, so the entry bytes of the initial
records are computed once and only the records an episode copied are serialised again. The text,
and so the hash, is fixed by the entries of the copied records: databases that end in the same
state (a gold replay and the episodes that did the same writes) are hashed once per process.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Iterator, Mapping
from functools import cached_property
from typing import Any

from pipeline.benchmarks.taubench.records import UpstreamRecord

Record = dict[str, Any]
# Database states whose hash a process remembers (a few hundred bytes each).
_KNOWN_HASHES = 4096


def copy_json(value: Any) -> Any:
    """Deep copy of a JSON value (dicts and lists; scalars are immutable and shared)."""
    if type(value) is dict:
        return {key: copy_json(item) for key, item in value.items()}
    if type(value) is list:
        return [copy_json(item) for item in value]
    return value


def _entry_bytes(key: str, record: Any) -> bytes:
    return f"{json.dumps(key)}: {json.dumps(record, sort_keys=True)}".encode()


def canonical_tables(raw: Mapping[str, Any], models: Mapping[str, type[UpstreamRecord]]) -> dict[str, dict[str, Record]]:
    """Validate every record through its model, as upstream loads its DB; dumping the models
    yields the canonical form (field order of the models, optional fields present as null)."""
    return {name: {key: model.model_validate(item).model_dump() for key, item in raw[name].items()}
            for name, model in models.items()}


class InitialTable:
    """One collection of the pristine database, in file order. Never mutated."""

    def __init__(self, records: dict[str, Record]) -> None:
        self.records = records

    @cached_property
    def entries(self) -> dict[str, bytes]:
        return {key: _entry_bytes(key, record) for key, record in self.records.items()}

    @cached_property
    def sorted_keys(self) -> list[str]:
        return sorted(self.records)

    @cached_property
    def body(self) -> bytes:
        entries = self.entries
        return b", ".join(entries[key] for key in self.sorted_keys)


class InitialDB:
    """A domain's database as loaded from its file, in canonical form, shared by all episodes."""

    def __init__(self, domain: str, tables: dict[str, InitialTable]) -> None:
        self.domain = domain
        self.tables = tables
        self._known_hashes: dict[bytes, str] = {}

    @classmethod
    def from_canonical(cls, domain: str, tables: Mapping[str, dict[str, Record]]) -> InitialDB:
        """From :func:`canonical_tables` (also as read back from JSON: the same records)."""
        return cls(domain, {name: InitialTable(records) for name, records in tables.items()})

    def fresh(self) -> EpisodeDB:
        return EpisodeDB(self)

    def known_hash(self, state: bytes, compute: Callable[[], str]) -> str:
        """The hash of the database state ``state`` names, computed once per process (bounded)."""
        known = self._known_hashes
        if state not in known:
            if len(known) >= _KNOWN_HASHES:
                known.clear()
            known[state] = compute()
        return known[state]

    @cached_property
    def canonical_hash(self) -> str:
        digest = hashlib.sha256()
        for chunk in self.fresh().chunks_by_table():
            digest.update(chunk)
        return digest.hexdigest()

    @cached_property
    def prefix_digests(self) -> list[Any]:
        """sha256 states of the canonical text up to each collection (in sorted order): an
        episode's hash starts from the state before its first changed collection."""
        states, digest = [], hashlib.sha256()
        for chunk in self.fresh().chunks_by_table():
            states.append(digest.copy())
            digest.update(chunk)
        return states


class Table(Mapping[str, Record]):
    """One collection as an episode sees it: initial records plus the episode's own copies.

    Reading returns the shared initial record unless the episode owns a copy, so callers must
    not mutate what ``[]`` returns: they ask :meth:`for_update` for a private copy first.
    Lookups with unhashable keys raise Python's own ``TypeError``, as a plain dict does.
    """

    __slots__ = ("_initial", "_own", "_added")

    def __init__(self, initial: InitialTable) -> None:
        self._initial = initial
        self._own: dict[str, Record] = {}
        self._added: list[str] = []

    def __contains__(self, key: object) -> bool:
        return key in self._own or key in self._initial.records

    def __getitem__(self, key: str) -> Record:
        if key in self._own:
            return self._own[key]
        return self._initial.records[key]

    def __iter__(self) -> Iterator[str]:
        yield from self._initial.records
        yield from self._added

    def __len__(self) -> int:
        return len(self._initial.records) + len(self._added)

    def for_update(self, key: str) -> Record:
        """The episode's own copy of an existing record, made on first use."""
        record = self._own.get(key)
        if record is None:
            record = copy_json(self._initial.records[key])
            self._own[key] = record
        return record

    def add(self, key: str, record: Record) -> None:
        """Store a new record after all existing ones (upstream appends to the dict)."""
        if key in self:
            raise KeyError(f"{key!r} already exists")
        self._own[key] = record
        self._added.append(key)

    @property
    def touched(self) -> bool:
        """Whether the episode copied or added any record (else the collection is the initial one)."""
        return bool(self._own)

    def own_entries(self) -> dict[str, bytes]:
        """The canonical entry of every record the episode copied or added."""
        return {key: _entry_bytes(key, record) for key, record in self._own.items()}

    def changed(self) -> dict[str, Record]:
        """Own records whose canonical form differs from the initial record (or that are new)."""
        initial = self._initial.entries
        return {
            key: record
            for key, record in self._own.items()
            if key not in initial or _entry_bytes(key, record) != initial[key]
        }

    def body(self) -> bytes:
        """The text between the braces of this collection in the sort_keys dump."""
        if not self._own:
            return self._initial.body
        keys = self._initial.sorted_keys
        if self._added:
            keys = sorted([*keys, *self._added])
        own = self.own_entries()
        initial = self._initial.entries
        return b", ".join(own[key] if key in own else initial[key] for key in keys)


class EpisodeDB:
    """The live database of one episode (or one replay)."""

    def __init__(self, initial: InitialDB) -> None:
        self.initial = initial
        self.tables = {name: Table(table) for name, table in initial.tables.items()}

    @property
    def domain(self) -> str:
        return self.initial.domain

    def __getitem__(self, name: str) -> Table:
        return self.tables[name]

    def chunks_by_table(self) -> Iterator[bytes]:
        """The canonical text in one chunk per collection (sorted), the closing brace last."""
        for index, name in enumerate(sorted(self.tables)):
            opening = (b", " if index else b"{") + json.dumps(name).encode() + b": {"
            yield opening + self.tables[name].body() + b"}"
        yield b"}"

    def canonical_text(self) -> str:
        """Exactly ``json.dumps(self.to_dict(), sort_keys=True)``."""
        return b"".join(self.chunks_by_table()).decode("ascii")

    def canonical_hash(self) -> str:
        """sha256 of :meth:`canonical_text`, resuming from the initial DB's digest before the first
        changed collection: an episode that touched nothing, or only late collections, re-hashes
        only what may differ."""
        names = sorted(self.tables)
        changed = [i for i, name in enumerate(names) if self.tables[name].touched]
        if not changed:
            return self.initial.canonical_hash

        def compute() -> str:
            digest = self.initial.prefix_digests[changed[0]].copy()
            for chunk in itertools.islice(self.chunks_by_table(), changed[0], None):
                digest.update(chunk)
            return digest.hexdigest()

        state = hashlib.sha256()
        for i in changed:
            state.update(b"\x00" + names[i].encode() + b"\x00")
            state.update(b"\x00".join(sorted(self.tables[names[i]].own_entries().values())))
        return self.initial.known_hash(state.digest(), compute)

    def changed_records(self) -> dict[str, dict[str, Record]]:
        """``{collection: {key: canonical record}}`` for every record that differs from the
        initial DB (new records included); collections without changes are left out."""
        changed = {name: table.changed() for name, table in self.tables.items()}
        return {name: copy_json(records) for name, records in changed.items() if records}

    def to_dict(self) -> dict[str, dict[str, Record]]:
        """A deep copy of the whole canonical database (slow: for tests and debugging)."""
        return {name: {key: copy_json(table[key]) for key in table} for name, table in self.tables.items()}


# Function forms of the two queries the conformance tooling and the CLI ask of a database.
canonical_hash = EpisodeDB.canonical_hash
changed_records = EpisodeDB.changed_records
