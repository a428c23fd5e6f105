"""The product database's files, read as WebShop reads them (``engine.load_products``).

A database folder holds ``items_shuffle.json`` (a JSON list of scraped products), ``items_ins_v2.json``
(ASIN -> attributes and a generated instruction), ``domain_data.json`` (MemoryArena's category chains)
and ``product_catalog/<top>_<sub>.json`` (ASIN, name and category, what the soft reward reads). The
products file is read as a stream, one object at a time, so checking or loading 1.18 M products
never holds the parsed list and its Python objects at once.

WebShop's rules kept here: products whose ASIN is ``nan`` or longer than 10 characters are skipped,
and so is an ASIN seen before; the title is ``name``; the price tag is ``$<first>`` or
``$<first> to $<second>`` of the ``$`` amounts in ``pricing`` as Python floats print them (``$100.0``
when there is none); options are lower-cased with ``/`` shown as `` | ``; the rating is
``average_rating`` or ``N.A.``; the search document is title, description, first bullet point and
the option texts, lower-cased.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from pipeline.benchmarks.memoryarena.data import MemoryArenaDataError, data_root

ITEMS = "items_shuffle.json"
ATTRIBUTES = "items_ins_v2.json"
DOMAIN = "domain_data.json"
CATALOG_DIR = "product_catalog"
DB_ENV_VAR = "FLOWSTATE_SHOPPING_DB"
FULL_SIZE = 1_181_436  # products in MemoryArena's database (CONTRACT §5.2)
# Fields of a product that the store reads (WebShop's loader fails without them).
REQUIRED = ("asin", "name", "full_description", "small_description", "customization_options", "images",
            "category", "query", "product_category")


class ProductDbError(MemoryArenaDataError):
    """The product database is missing, unreadable or not in the real files' format."""


def default_db_dir() -> Path:
    """``$FLOWSTATE_SHOPPING_DB``, else ``<data dir>/memoryarena/product_db`` (where the fetch puts it)."""
    named = os.environ.get(DB_ENV_VAR)
    return Path(named).expanduser().resolve() if named else data_root() / "product_db"


@dataclass(frozen=True)
class Product:
    """One product as the store shows it."""

    asin: str
    title: str
    description: str
    bullet_points: tuple[str, ...]
    price_tag: str
    rating: str
    options: dict[str, tuple[str, ...]] = field(default_factory=dict)
    db_name: str | None = None  # upstream's name lookup: name, else title, else small_description

    def document(self) -> str:
        """The text the search index covers, as WebShop's index builder joins it."""
        option_text = ", and ".join(f"{name}: {', '.join(values)}" for name, values in self.options.items())
        first_bullet = self.bullet_points[0] if self.bullet_points else ""
        return " ".join([self.title, self.description, first_bullet, option_text]).lower()


class _JsonReader:
    """A JSON file read in chunks: one value at a time with ``json``'s own decoder."""

    def __init__(self, path: Path, chunk: int) -> None:
        self.path, self.chunk = path, chunk
        try:
            self.handle = path.open(encoding="utf-8")
        except OSError as exc:
            raise ProductDbError(f"{path} is missing or unreadable ({exc.strerror})") from None
        self.buffer, self.position, self.consumed, self.eof = "", 0, 0, False
        self.decoder = json.JSONDecoder()

    def _more(self) -> bool:
        try:
            more = self.handle.read(self.chunk)
        except UnicodeDecodeError:
            raise ProductDbError(f"{self.path}: not UTF-8 text near character {self.consumed + len(self.buffer)}") from None
        if not more:
            self.eof = True
            return False
        self.consumed += self.position
        self.buffer, self.position = self.buffer[self.position:] + more, 0
        return True

    def peek(self) -> str:
        """The next character that is not white space ('' at the end of the file)."""
        while True:
            while self.position < len(self.buffer) and self.buffer[self.position] in " \t\r\n":
                self.position += 1
            if self.position < len(self.buffer):
                return self.buffer[self.position]
            if not self._more():
                return ""

    def expect(self, wanted: str) -> None:
        found = self.peek()
        if found != wanted:
            where = f"character {self.consumed + self.position}"
            raise ProductDbError(f"{self.path}: expected {wanted!r} at {where}, found "
                                 + (repr(found) if found else "the end of the file"))
        self.position += 1

    def value(self) -> Any:
        self.peek()
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buffer, self.position)
                if end < len(self.buffer) or self.eof:  # a value cut at the buffer's end may parse short
                    self.position = end
                    return value
            except json.JSONDecodeError as exc:
                if self.eof:
                    raise ProductDbError(f"{self.path}: not valid JSON at character {self.consumed + exc.pos} "
                                         f"({exc.msg})") from None
            self._more()

    def close(self) -> None:
        self.handle.close()


def _items(reader: _JsonReader, opener: str, closer: str) -> Iterator[Any]:
    reader.expect(opener)
    if reader.peek() == closer:
        reader.position += 1
        return
    while True:
        if opener == "{":
            key = reader.value()
            reader.expect(":")
            yield key, reader.value()
        else:
            yield reader.value()
        if reader.peek() == closer:
            reader.position += 1
            return
        reader.expect(",")


def iter_json_array(path: Path, chunk: int = 1 << 20) -> Iterator[Any]:
    """The elements of a JSON list file, one at a time (bounded memory for a multi-GB file)."""
    reader = _JsonReader(path, chunk)
    try:
        yield from _items(reader, "[", "]")
    finally:
        reader.close()


def iter_json_object(path: Path, chunk: int = 1 << 20) -> Iterator[tuple[str, Any]]:
    """The (key, value) pairs of a JSON object file, one at a time."""
    reader = _JsonReader(path, chunk)
    try:
        yield from _items(reader, "{", "}")
    finally:
        reader.close()


def _price(pricing: Any) -> str:
    """WebShop's price tag from the ``pricing`` text."""
    if not pricing or not isinstance(pricing, str):
        return "$100.0"
    try:
        amounts = [float(Decimal(re.sub(r"[^\d.]", "", part))) for part in pricing.split("$")[1:]]
    except InvalidOperation:
        amounts = []
    if not amounts:  # upstream fails on such a product; shown as having no price
        return "$100.0"
    return f"${amounts[0]}" if len(amounts) == 1 else f"${amounts[0]} to ${amounts[1]}"


def _options(raw: Any) -> dict[str, tuple[str, ...]]:
    options: dict[str, tuple[str, ...]] = {}
    if isinstance(raw, dict):
        for name, contents in raw.items():
            if contents is None:
                continue
            options[str(name).lower()] = tuple(str(c.get("value", "")).strip().replace("/", " | ").lower()
                                               for c in contents if isinstance(c, dict))
    return options


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def product_from_record(raw: dict[str, Any]) -> Product:
    bullets = raw.get("small_description")
    bullet_points = tuple(_text(b) for b in bullets) if isinstance(bullets, list) else (_text(bullets),)
    rating = raw.get("average_rating")
    name = raw.get("name") or raw.get("title") or raw.get("small_description")
    if isinstance(name, list):  # bullet points: their text
        name = " ".join(_text(b) for b in name)
    return Product(asin=str(raw["asin"]), title=_text(raw.get("name")), description=_text(raw.get("full_description")),
                   bullet_points=bullet_points, price_tag=_price(raw.get("pricing")),
                   rating=str(rating) if rating else "N.A.", options=_options(raw.get("customization_options")),
                   db_name=_text(name) if name else None)


def skipped_asin(asin: str, seen: set[str]) -> bool:
    """WebShop's loader skips an ASIN that is ``nan``, longer than 10 characters, or seen before."""
    return asin == "nan" or len(asin) > 10 or asin in seen


def iter_products(path: Path) -> Iterator[Product]:
    """The store's products in file order, with WebShop's skips (bad or repeated ASINs)."""
    seen: set[str] = set()
    for index, raw in enumerate(iter_json_array(path)):
        if not isinstance(raw, dict) or not isinstance(raw.get("asin"), str):
            raise ProductDbError(f"{path}: product {index} is not an object with a string asin")
        asin = raw["asin"]
        if skipped_asin(asin, seen):
            continue
        seen.add(asin)
        yield product_from_record(raw)


def catalog_files(db_dir: Path) -> list[Path]:
    return sorted((db_dir / CATALOG_DIR).glob("*.json"))


def iter_catalog(db_dir: Path) -> Iterator[tuple[str, str | None, str | None]]:
    """(ASIN upper-cased, name, product_category) of every catalogue entry, first occurrence first
    (what upstream's grader reads; files in name order, unreadable files skipped as upstream does)."""
    for path in catalog_files(db_dir):
        try:
            entries = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if not isinstance(entries, list):
            continue
        for entry in entries:
            if not isinstance(entry, dict):
                continue
            info = entry.get("product_information")
            asin = entry.get("asin") or (info.get("ASIN") if isinstance(info, dict) else None)
            if asin:
                name, category = entry.get("name"), entry.get("product_category")
                yield str(asin).strip().upper(), str(name) if name else None, str(category) if category else None
