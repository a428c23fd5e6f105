"""`flowstate memoryarena check-db DIR`: is this folder a product database the store can serve?

Checks every file's name, JSON shape, the fields the store and the grader read, and the counts,
reading the large files as streams. Problems are collected (the first few of each kind, with the
product's position and the field) and reported together; what upstream tolerates (skipped ASINs, a
database smaller than MemoryArena's) is a warning, not an error.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from pipeline.benchmarks.memoryarena.shopping.productdb import (
    ATTRIBUTES,
    CATALOG_DIR,
    DOMAIN,
    FULL_SIZE,
    ITEMS,
    REQUIRED,
    ProductDbError,
    catalog_files,
    iter_json_array,
    iter_json_object,
    skipped_asin,
)

SHOWN = 5  # problems shown per kind


class DbCheck(BaseModel):
    model_config = ConfigDict(extra="forbid")

    products: int
    skipped: int
    with_attributes: int
    chains: int
    catalog_files: int
    catalog_entries: int
    bytes: int
    warnings: list[str] = []


class _Problems:
    def __init__(self) -> None:
        self.kinds: dict[str, list[str]] = {}
        self.counts: Counter[str] = Counter()

    def add(self, kind: str, text: str) -> None:
        self.counts[kind] += 1
        if self.counts[kind] <= SHOWN:
            self.kinds.setdefault(kind, []).append(text)

    def lines(self) -> list[str]:
        out: list[str] = []
        for kind, shown in self.kinds.items():
            more = self.counts[kind] - len(shown)
            out.extend(f"  {text}" for text in shown)
            if more:
                out.append(f"  ... and {more} more: {kind}")
        return out


def _check_product(index: int, raw: Any, problems: _Problems) -> str | None:
    if not isinstance(raw, dict):
        problems.add("not an object", f"{ITEMS}[{index}]: a product is a JSON object, got {type(raw).__name__}")
        return None
    missing = [f for f in REQUIRED if f not in raw]
    if missing:
        problems.add("missing fields", f"{ITEMS}[{index}]: missing {', '.join(missing)}")
    asin = raw.get("asin")
    if not isinstance(asin, str):
        problems.add("asin", f"{ITEMS}[{index}]: asin must be a string, got {asin!r}")
        return None
    if "name" in raw and not isinstance(raw["name"], str):
        problems.add("name", f"{ITEMS}[{index}] ({asin}): name must be a string")
    images = raw.get("images")
    if "images" in raw and not (isinstance(images, list) and images):
        problems.add("images", f"{ITEMS}[{index}] ({asin}): images must be a non-empty list")
    options = raw.get("customization_options")
    if options is not None and not (isinstance(options, dict) and all(
            c is None or (isinstance(c, list) and all(isinstance(v, dict) and "value" in v for v in c))
            for c in options.values())):
        problems.add("options", f"{ITEMS}[{index}] ({asin}): customization_options must map names to "
                                "lists of {\"value\": ...}")
    pricing = raw.get("pricing")
    if pricing is not None and not isinstance(pricing, str):
        problems.add("pricing", f"{ITEMS}[{index}] ({asin}): pricing must be text like \"$12.99\"")
    return asin


def check_db(db_dir: Path) -> DbCheck:
    """The database's counts and warnings; :class:`ProductDbError` listing every problem found."""
    if not db_dir.is_dir():
        raise ProductDbError(f"{db_dir} is not a folder: a product database is a folder with {ITEMS}, {ATTRIBUTES}, "
                             f"{DOMAIN} and {CATALOG_DIR}/")
    missing = [n for n in (ITEMS, ATTRIBUTES, DOMAIN) if not (db_dir / n).is_file()]
    if not catalog_files(db_dir):
        missing.append(f"{CATALOG_DIR}/*.json")
    if missing:
        raise ProductDbError(f"{db_dir} lacks {', '.join(missing)}")
    problems, warnings = _Problems(), []
    seen: set[str] = set()
    products = skipped = 0
    for index, raw in enumerate(iter_json_array(db_dir / ITEMS)):
        asin = _check_product(index, raw, problems)
        if asin is None:
            continue
        if skipped_asin(asin, seen):
            skipped += 1
            continue
        seen.add(asin)
        products += 1
    with_attributes = 0
    for asin, entry in iter_json_object(db_dir / ATTRIBUTES):
        if not isinstance(entry, dict) or not isinstance(entry.get("attributes", []), list):
            problems.add("attributes", f"{ATTRIBUTES}[{asin!r}]: expected an object with an attributes list")
        elif asin in seen:
            with_attributes += 1
    chains = list(iter_json_array(db_dir / DOMAIN))
    for i, chain in enumerate(chains):
        if not (isinstance(chain, dict) and isinstance(chain.get("chain_id"), str) and isinstance(chain.get("path"), list)
                and all(isinstance(s, dict) and "product_category" in s for s in chain["path"])):
            problems.add("chains", f"{DOMAIN}[{i}]: expected {{\"chain_id\": str, \"path\": [{{\"product_category\": "
                                   "str, ...}, ...]}")
    entries = 0
    for path in catalog_files(db_dir):
        try:
            listed = list(iter_json_array(path))
        except ProductDbError as exc:
            problems.add("catalogue files", str(exc))
            continue
        for i, entry in enumerate(listed):
            if not (isinstance(entry, dict) and entry.get("asin") and isinstance(entry.get("name"), str)
                    and isinstance(entry.get("product_category"), str)):
                problems.add("catalogue entries", f"{CATALOG_DIR}/{path.name}[{i}]: expected asin, name and "
                                                  "product_category")
        entries += len(listed)
    if problems.counts:
        raise ProductDbError(f"{db_dir} is not a usable product database:\n" + "\n".join(problems.lines()))
    if skipped:
        warnings.append(f"{skipped} products skipped as WebShop skips them (ASIN 'nan', longer than 10, or repeated)")
    if products != FULL_SIZE:
        warnings.append(f"{products:,} products: MemoryArena's database has {FULL_SIZE:,} (fine for tests, not for "
                        "the paper's numbers)")
    size = sum(p.stat().st_size for p in db_dir.rglob("*") if p.is_file())
    return DbCheck(products=products, skipped=skipped, with_attributes=with_attributes, chains=len(chains),
                   catalog_files=len(catalog_files(db_dir)), catalog_entries=entries, bytes=size, warnings=warnings)
