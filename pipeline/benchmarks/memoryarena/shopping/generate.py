"""Made-up product databases in the real files' format, for tests and benchmarks.

The synthetic catalogue of the shopping examples (90 invented products) becomes WebShop records,
and as many generated products as asked are added (invented brands, nouns and options, drawn with
a fixed seed, so the same arguments always write the same bytes). Written: ``items_shuffle.json``,
``items_ins_v2.json``, ``domain_data.json`` (one chain per example task: the categories of its
targets) and ``product_catalog/<top>_<sub>.json`` (upstream's file naming, from the first two
category segments). Nothing here is MemoryArena or WebShop data.
"""

from __future__ import annotations

import json
import os
import random
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from pipeline.benchmarks.memoryarena.data import ShoppingTask, data_root, load_tasks, task_file
from pipeline.benchmarks.memoryarena.shopping.productdb import ATTRIBUTES, CATALOG_DIR, DOMAIN, ITEMS, ProductDbError
from pipeline.core.atomic import write_text_atomic

CATALOG = "bundled_shopping.synthetic_catalog.json"
_BRANDS = ("Acme", "Nordlys", "Vantor", "Kestrel", "Lumio", "Brightfield", "Oakhaven", "Zenwell", "Ferro", "Calder",
           "Mistral", "Tidewater", "Solenne", "Harbor", "Quillon", "Ardent")
_NOUNS = ("Stand Mixer", "Mixing Bowl Set", "Baking Sheet", "Sound Bar", "HDMI Cable", "Desk Lamp", "Area Rug",
          "Throw Pillow", "Curtain Panel", "LED Bulb", "Extension Cord", "Almond Flour", "Vanilla Extract",
          "Smart Plug", "TV Mount", "Streaming Player", "Rug Pad", "Pizza Pan", "Parchment Paper", "Floor Lamp")
_TRAITS = ("Stainless Steel", "Non-Slip", "Dimmable", "Organic", "Heavy Duty", "Compact", "Wireless", "Braided",
           "Machine Washable", "Energy Saving", "Gluten Free", "Adjustable", "Ceramic", "Bamboo", "4K", "Waterproof")
_COLORS = ("black", "white", "silver", "red", "navy blue", "sage green", "charcoal", "beige")
_SIZES = ("small", "medium", "large", "set of 2", "set of 4", "6 feet", "10 feet", "12 ounce")
_CATEGORIES = ("Home & Kitchen › Kitchen & Dining › Bakeware › Baking Dishes",
               "Electronics › Television & Video › Accessories › TV Mounts",
               "Grocery & Gourmet Food › Pantry Staples › Cooking & Baking › Flours & Meals › Almond Flour",
               "Home & Kitchen › Home Décor Products › Area Rugs, Runners & Pads › Area Rugs",
               "Tools & Home Improvement › Light Bulbs › LED Bulbs",
               "Beauty & Personal Care › Skin Care › Face › Moisturizers")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower().replace("&", " ")).strip("_")


def catalog_file_name(category: str) -> str | None:
    """Upstream's catalogue file for a category: its first two segments, slugged (None with fewer)."""
    segments = [s.strip() for s in category.split("\u203a") if s.strip()]
    if len(segments) < 2 or not _slug(segments[0]) or not _slug(segments[1]):
        return None
    return f"{_slug(segments[0])}_{_slug(segments[1])}.json"


_FILLER = tuple(f"{a}{b}" for a in ("lo", "ra", "ve", "ki", "mu", "ta", "se", "po") for b in ("ne", "ris", "dam", "tol",
                                                                                         "vex", "sun", "ba", "gor"))


def _record(asin: str, name: str, category: str, pricing: str, rating: float, rng: random.Random,
            options: dict[str, list[str]], description_words: int = 0) -> dict[str, Any]:
    top = category.split("\u203a")[0].strip().lower()
    words = name.split(",")[0]
    filler = " ".join(rng.choice(_FILLER) for _ in range(description_words))
    return {
        "asin": asin, "name": name, "category": top.split(" ")[0], "query": words.lower(),
        "product_category": category, "pricing": pricing, "average_rating": rating,
        "full_description": f"{name}. Made up for tests: {words.lower()} with a {rng.choice(_TRAITS).lower()} finish."
                            + (f" {filler}" if filler else ""),
        "small_description": [f"{words} you can rely on", f"Rated {rating} by invented shoppers"],
        "images": [f"https://example.invalid/images/{asin}.jpg"],
        "customization_options": {k: [{"value": v, "image": None} for v in vs] for k, vs in options.items()},
        "product_information": {"ASIN": asin}, "brand": name.split(" ")[0], "total_reviews": rng.randint(0, 900),
    }


def _attributes(name: str) -> list[str]:
    return [part.strip().lower() for part in name.split(",")[1:] if part.strip()][:3]


def synthetic_records(extra: int, seed: int = 0, data_dir: Path | None = None, description_words: int = 0,
                      ) -> tuple[list[dict[str, Any]], list[ShoppingTask]]:
    """The example catalogue's products as WebShop records, then ``extra`` generated ones (their
    descriptions padded with ``description_words`` made-up words, for realistic sizes)."""
    root = data_root(data_dir)
    try:
        catalogue = json.loads((root / "examples" / CATALOG).read_text(encoding="utf-8"))["products"]
    except (OSError, ValueError, KeyError) as exc:
        raise ProductDbError(f"the synthetic shopping catalogue {root / 'examples' / CATALOG} is unreadable ({exc})") from None
    tasks = [t for t in load_tasks(task_file("bundled_shopping", "examples", data_dir), "bundled_shopping")
             if isinstance(t, ShoppingTask)]
    rng = random.Random(seed)
    records = [_record(p["asin"], p["name"], p["product_category"], p["pricing"], p["average_rating"], rng, {})
               for p in catalogue]
    for n in range(extra):
        noun = rng.choice(_NOUNS)
        name = f"{rng.choice(_BRANDS)} {rng.choice(_TRAITS)} {noun}, {rng.choice(_TRAITS)}, {rng.choice(_COLORS).title()}"
        options = {"color": rng.sample(_COLORS, 3)} if rng.random() < 0.5 else {}
        if rng.random() < 0.3:
            options["size"] = rng.sample(_SIZES, 2)
        low = rng.randint(5, 400) + rng.choice((0.0, 0.49, 0.99))
        pricing = f"${low:.2f}" if rng.random() < 0.8 else f"${low:.2f} - ${low + rng.randint(5, 60):.2f}"
        records.append(_record(f"B0G{n:07d}", name, rng.choice(_CATEGORIES), pricing, round(rng.uniform(2.5, 5.0), 1),
                               rng, options, description_words))
    return records, tasks


def write_product_db(out: Path, extra: int = 1000, seed: int = 0, data_dir: Path | None = None,
                     description_words: int = 0) -> int:
    """Write a database to ``out``; returns the number of products."""
    records, tasks = synthetic_records(extra, seed, data_dir, description_words)
    by_asin = {r["asin"]: r for r in records}
    out.mkdir(parents=True, exist_ok=True)
    with_items = "[\n" + ",\n".join(json.dumps(r, ensure_ascii=False, sort_keys=True) for r in records) + "\n]\n"
    write_text_atomic(out / ITEMS, with_items)
    attributes = {r["asin"]: {"attributes": _attributes(r["name"]), "instruction": f"i need {r['query']}",
                              "instruction_attributes": _attributes(r["name"])} for r in records}
    write_text_atomic(out / ATTRIBUTES, json.dumps(attributes, ensure_ascii=False, sort_keys=True))
    chains = [{"chain_id": t.category, "path": [
        {"step": k, "target_asin": a.target_asin,
         "product_category": by_asin.get(a.target_asin, {}).get("product_category", "")}
        for k, a in enumerate(t.answers, 1)]} for t in tasks]
    write_text_atomic(out / DOMAIN, json.dumps(chains, ensure_ascii=False, indent=1))
    files: dict[str, list[dict[str, str]]] = defaultdict(list)
    for r in records:
        name = catalog_file_name(r["product_category"])
        if name:
            files[name].append({"asin": r["asin"], "name": r["name"], "product_category": r["product_category"]})
    for name, entries in files.items():
        write_text_atomic(out / CATALOG_DIR / name, json.dumps(entries, ensure_ascii=False, indent=1))
    return len(records)


EXAMPLE_EXTRA = 1000  # generated products beside the example catalogue's 90 in the examples' database
GENERATOR = "1"  # bump when the generator's output changes


def example_db(data_dir: Path | None = None) -> Path:
    """The database the synthetic shopping examples run on: generated once into the cache (keyed by
    the example files and the generator), so every machine builds the same bytes."""
    import hashlib
    import shutil

    from pipeline.core.data import cache_root, sha256_file

    root = data_root(data_dir)
    sources = [root / "examples" / CATALOG, task_file("bundled_shopping", "examples", data_dir)]
    try:
        key = hashlib.sha256("".join([GENERATOR, str(EXAMPLE_EXTRA), *map(sha256_file, sources)]).encode()).hexdigest()
    except OSError as exc:
        raise ProductDbError(f"the synthetic shopping examples are missing ({exc})") from None
    folder = cache_root() / "memoryarena" / "example_product_db" / key[:16]
    if not (folder / ITEMS).is_file():
        staging = folder.with_name(f".{folder.name}.{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        write_product_db(staging, EXAMPLE_EXTRA, seed=0, data_dir=data_dir)
        try:
            staging.rename(folder)
        except OSError:  # another process finished first: same bytes
            shutil.rmtree(staging, ignore_errors=True)
    return folder
