"""The product store: the database and its search index, held once per node.

Upstream's loader keeps the whole database in memory (about 5 GB for 1.18 M products). Here one
Ray actor per node and database holds it (created by the first episode that needs it, found by name
by the others); episodes ask it for search hits and product pages and keep their own page and
options. Outside Ray (tests, tools) the store lives in the process, once per database version.

Derived files (the search index, the SHA-256 of the database files, the name table grading reads)
are cached under ``$FLOWSTATE_CACHE`` (default ``~/.cache/flowstate``), never beside the database,
which may be read-only.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pipeline.benchmarks.memoryarena.shopping.productdb import (
    ATTRIBUTES,
    CATALOG_DIR,
    DOMAIN,
    ITEMS,
    Product,
    ProductDbError,
    catalog_files,
    iter_catalog,
    iter_products,
)
from pipeline.benchmarks.memoryarena.shopping.search import TOP_N, SearchIndex, cached_index
from pipeline.core.atomic import write_json_atomic
from pipeline.core.commands import flowstate_command
from pipeline.core.data import cache_root, sha256_file

if TYPE_CHECKING:
    from ray.actor import ActorClass


def _key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def db_cache_dir(db_dir: Path) -> Path:
    return cache_root() / "memoryarena" / "shopping" / _key(str(db_dir.resolve()))


def cached_sha256(path: Path) -> str:
    """A file's SHA-256, computed once per file version (size and modification time)."""
    stat = path.stat()
    record = cache_root() / "sha256" / f"{_key(str(path.resolve()))}.json"
    version = [stat.st_size, stat.st_mtime_ns]
    try:
        known = json.loads(record.read_text())
        if known["version"] == version:
            return str(known["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    digest = sha256_file(path)
    write_json_atomic(record, {"path": str(path), "version": version, "sha256": digest})
    return digest


def db_checksums(db_dir: Path) -> dict[str, str]:
    """SHA-256 of each database file (the catalogue folder as one value over its files' names and sums)."""
    missing = [name for name in (ITEMS, ATTRIBUTES, DOMAIN) if not (db_dir / name).is_file()]
    if missing or not catalog_files(db_dir):
        what = ", ".join(missing + ([f"{CATALOG_DIR}/*.json"] if not catalog_files(db_dir) else []))
        raise ProductDbError(f"product database {db_dir} lacks {what}: run "
                             f"`{flowstate_command('data fetch memoryarena --with-shopping-db')}`, or check it with "
                             f"`{flowstate_command('memoryarena check-db')}`")
    sums = {name: cached_sha256(db_dir / name) for name in (ITEMS, ATTRIBUTES, DOMAIN)}
    catalog = hashlib.sha256()
    for path in catalog_files(db_dir):
        catalog.update(f"{path.name}\0{cached_sha256(path)}\n".encode())
    sums[f"{CATALOG_DIR}/"] = catalog.hexdigest()
    return sums


@dataclass(frozen=True)
class Hit:
    """One search result as the results page lists it."""

    asin: str
    title: str
    price_tag: str


class ProductStore:
    """The database in memory with its index (see the module docstring for where it lives)."""

    def __init__(self, products: list[Product], index: SearchIndex, *, load_s: float = 0.0,
                 index_built: bool = False) -> None:
        self.products = products
        self.by_asin = {p.asin: i for i, p in enumerate(products)}
        self.index = index
        self.load_s = load_s
        self.index_built = index_built

    @classmethod
    def open(cls, db_dir: Path) -> ProductStore:
        started = time.perf_counter()
        items = db_dir / ITEMS
        if not items.is_file():
            raise ProductDbError(f"product database {db_dir} has no {ITEMS}: run "
                                 f"`{flowstate_command('data fetch memoryarena --with-shopping-db')}`, "
                                 "or set FLOWSTATE_SHOPPING_DB")
        products = list(iter_products(items))
        index, built = cached_index(db_cache_dir(db_dir) / "index", cached_sha256(items),
                                    lambda: (p.document() for p in products))
        if index.size != len(products):
            raise ProductDbError(f"the search index of {db_dir} covers {index.size} products, the file has "
                                 f"{len(products)}: remove {db_cache_dir(db_dir)} to rebuild it")
        return cls(products, index, load_s=time.perf_counter() - started, index_built=built)

    def search(self, keywords: str) -> list[Hit]:
        return [Hit(p.asin, p.title, p.price_tag) for p in (self.products[i] for i in self.index.search(keywords, TOP_N))]

    def product(self, asin: str) -> Product | None:
        found = self.by_asin.get(asin)
        return None if found is None else self.products[found]


class StoreClient(Protocol):
    """What an episode asks the store (in this process or in the node's actor)."""

    async def search(self, keywords: str) -> list[Hit]: ...

    async def product(self, asin: str) -> Product | None: ...


class LocalStore:
    def __init__(self, store: ProductStore) -> None:
        self.store = store

    async def search(self, keywords: str) -> list[Hit]:
        return self.store.search(keywords)

    async def product(self, asin: str) -> Product | None:
        return self.store.product(asin)


class NodeStoreClient:
    """The node's store actor, asked without blocking the episode's event loop.

    Every process keeps its handle (a Ray actor nobody holds a handle to is destroyed); the actor
    lives as long as the process that created it, so when that one goes (a replaced episode actor, the
    end of a sweep) the next call finds it gone and starts a fresh one on the node.
    """

    def __init__(self, db_dir: Path, version: str) -> None:
        self.db_dir, self.version = db_dir, version

    async def _call(self, method: str, argument: str) -> Any:
        from ray.exceptions import RayActorError

        try:
            return await getattr(_node_actor(self.db_dir, self.version), method).remote(argument)
        except RayActorError:
            return await getattr(_node_actor(self.db_dir, self.version, fresh=True), method).remote(argument)

    async def search(self, keywords: str) -> list[Hit]:
        return await self._call("search", keywords)

    async def product(self, asin: str) -> Product | None:
        return await self._call("product", asin)


@cache
def _local(db_dir: Path, version: str) -> ProductStore:
    return ProductStore.open(db_dir)


_actors: dict[tuple[Path, str], Any] = {}


def _node_actor(db_dir: Path, version: str, *, fresh: bool = False) -> Any:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    key = (db_dir, version)
    if fresh or key not in _actors:
        node = ray.get_runtime_context().get_node_id()
        _actors[key] = _node_store_class().options(
            name=f"flowstate-shopping-{version[:12]}-{node[:12]}", get_if_exists=True, num_cpus=0, max_concurrency=4,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node, soft=False)).remote(str(db_dir))
    return _actors[key]


def store_for(db_dir: Path) -> StoreClient:
    """The store for this database: the node's actor under Ray, else one in this process."""
    import ray

    items = db_dir / ITEMS
    if not items.is_file():
        raise ProductDbError(f"product database {db_dir} has no {ITEMS}")
    version, db_dir = cached_sha256(items), db_dir.resolve()
    if not ray.is_initialized():
        return LocalStore(_local(db_dir, version))
    _node_actor(db_dir, version)
    return NodeStoreClient(db_dir, version)


@cache
def _node_store_class() -> ActorClass[_NodeStore]:
    import ray

    return ray.remote(_NodeStore)


class _NodeStore:
    """The Ray actor body: the node's copy of the database."""

    def __init__(self, db_dir: str) -> None:
        self.store = ProductStore.open(Path(db_dir))

    def search(self, keywords: str) -> list[Hit]:
        return self.store.search(keywords)

    def product(self, asin: str) -> Product | None:
        return self.store.product(asin)


# -- the names grading reads ------------------------------------------------------------------------
@dataclass(frozen=True)
class Names:
    """What the soft reward reads about one ASIN: the database's name (items file) and the catalogue's
    name and category."""

    db_name: str | None
    catalog_name: str | None
    category: str | None


def product_names(db_dir: Path, asins: set[str]) -> dict[str, Names]:
    """Names of the given ASINs (upper-cased keys), from a table cached per database version."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    sums = db_checksums(db_dir)
    table_path = db_cache_dir(db_dir) / f"names-{_key(json.dumps(sums, sort_keys=True))}.parquet"
    if not table_path.is_file():
        _write_names(db_dir, table_path)
    wanted = sorted(a.upper() for a in asins)
    table = pq.read_table(table_path, filters=pc.field("asin").isin(wanted) if wanted else None)
    return {row["asin"]: Names(row["db_name"], row["catalog_name"], row["category"]) for row in table.to_pylist()
            if wanted}


def _write_names(db_dir: Path, path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipeline.core.atomic import write_atomic

    db_names: dict[str, str | None] = {}
    for product in iter_products(db_dir / ITEMS):
        db_names.setdefault(product.asin.upper(), product.db_name)
    catalog: dict[str, tuple[str | None, str | None]] = {}
    for asin, name, category in iter_catalog(db_dir):
        known = catalog.get(asin, (None, None))
        catalog[asin] = (known[0] or name, known[1] or category)  # first entry with each field wins
    asins = sorted(set(db_names) | set(catalog))
    table = pa.table({"asin": asins, "db_name": [db_names.get(a) for a in asins],
                      "catalog_name": [catalog.get(a, (None, None))[0] for a in asins],
                      "category": [catalog.get(a, (None, None))[1] for a in asins]})
    write_atomic(path, lambda tmp: pq.write_table(table, tmp))
