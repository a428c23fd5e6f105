"""The shopping store: the product files read as WebShop reads them, the BM25 search and its cache,
the pages, clickables and actions of the text environment (CONTRACT §5.2)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.benchmarks.memoryarena.shopping import store as store_module
from pipeline.benchmarks.memoryarena.shopping.checkdb import check_db
from pipeline.benchmarks.memoryarena.shopping.generate import catalog_file_name, write_product_db
from pipeline.benchmarks.memoryarena.shopping.pages import Session, parse_action, search_page
from pipeline.benchmarks.memoryarena.shopping.productdb import (
    ATTRIBUTES,
    DOMAIN,
    ITEMS,
    ProductDbError,
    iter_json_array,
    iter_json_object,
    iter_products,
    product_from_record,
)
from pipeline.benchmarks.memoryarena.shopping.search import SearchIndex
from pipeline.benchmarks.memoryarena.shopping.store import LocalStore, ProductStore, db_checksums, product_names
from tests.pipeline.conftest import DATA_DIR

INSTRUCTION = "Buy a mixer.\n"  # an instruction, ending with a line break as every I_k does


def record(asin: str, name: str, **extra: Any) -> dict[str, Any]:
    base = {"asin": asin, "name": name, "full_description": f"about {name}", "small_description": [f"{name} bullet"],
            "customization_options": {}, "images": ["x.jpg"], "category": "home", "query": name.lower(),
            "product_category": "Home & Kitchen › Kitchen & Dining › Mixers", "pricing": "$10.00", "average_rating": 4.5}
    return {**base, **extra}


def write_db(folder: Path, records: list[dict[str, Any]]) -> Path:
    (folder / "product_catalog").mkdir(parents=True, exist_ok=True)
    (folder / ITEMS).write_text(json.dumps(records))
    (folder / ATTRIBUTES).write_text(json.dumps({r["asin"]: {"attributes": []} for r in records}))
    (folder / DOMAIN).write_text(json.dumps([{"chain_id": "c", "path": [{"product_category": "x"}]}]))
    catalog = [{"asin": r["asin"], "name": r["name"], "product_category": r["product_category"]} for r in records]
    (folder / "product_catalog" / "home_kitchen_kitchen_dining.json").write_text(json.dumps(catalog))
    return folder


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOWSTATE_CACHE", str(tmp_path / "cache"))


# -- the files ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("pricing", "tag"), [
    ("$27.50", "$27.5"), ("$189.99", "$189.99"), ("$10.99 - $20.00", "$10.99 to $20.0"), ("", "$100.0"),
    (None, "$100.0"), ("$1,299.00", "$1299.0"),
])
def test_the_price_tag_is_webshops(pricing: Any, tag: str) -> None:
    assert product_from_record(record("B000000001", "x", pricing=pricing)).price_tag == tag


def test_a_product_reads_as_webshop_shows_it() -> None:
    p = product_from_record(record("B000000001", "Mixer Pro", average_rating=0, small_description="one bullet",
                                   customization_options={"Color": [{"value": " Red/Blue "}], "Size": None}))
    assert (p.rating, p.bullet_points, p.options) == ("N.A.", ("one bullet",), {"color": ("red | blue",)})
    assert p.document() == "mixer pro about mixer pro one bullet color: red | blue"
    assert product_from_record(record("B1", "", title="T")).db_name == "T"  # name, else title, else small_description
    assert product_from_record(record("B1", "", small_description="S")).db_name == "S"
    assert product_from_record(record("B1", "", small_description=["a", "b"])).db_name == "a b"


def test_bad_and_repeated_asins_are_skipped_as_webshop_skips_them(tmp_path: Path) -> None:
    path = tmp_path / ITEMS
    path.write_text(json.dumps([record("nan", "a"), record("B00000000012", "too long"), record("B1", "first"),
                                record("B1", "again"), record("B2", "second")]))
    assert [(p.asin, p.title) for p in iter_products(path)] == [("B1", "first"), ("B2", "second")]


@pytest.mark.parametrize("chunk", [3, 64, 1 << 20])
def test_large_json_files_are_read_as_streams(tmp_path: Path, chunk: int) -> None:
    values = [{"a": i, "text": "é" * (i % 40)} for i in range(300)] + [12345, "s", [1, 2], None]
    (tmp_path / "a.json").write_text(json.dumps(values, indent=1))
    assert list(iter_json_array(tmp_path / "a.json", chunk)) == values
    mapping = {f"k{i}": {"v": [i, "x" * i]} for i in range(200)}
    (tmp_path / "o.json").write_text(json.dumps(mapping))
    assert dict(iter_json_object(tmp_path / "o.json", chunk)) == mapping


@pytest.mark.parametrize(("text", "message"), [
    ("[1, 2", "expected ','.* found the end of the file"), ('{"a": 1}', r"expected '\['"), ("[1 2]", "expected ','"),
    ("", "expected '\\['.*the end of the file"), ('[{"a": }]', "not valid JSON at character 7"),
])
def test_a_malformed_file_names_where(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "b.json").write_text(text)
    with pytest.raises(ProductDbError, match=message):
        list(iter_json_array(tmp_path / "b.json", 4))


def test_a_generated_database_passes_the_check_and_is_the_same_every_time(tmp_path: Path) -> None:
    count = write_product_db(tmp_path / "a", 40, data_dir=DATA_DIR)
    write_product_db(tmp_path / "b", 40, data_dir=DATA_DIR)
    assert count == 130
    assert {p.name: p.read_bytes() for p in (tmp_path / "a").rglob("*") if p.is_file()} == {
        p.name: p.read_bytes() for p in (tmp_path / "b").rglob("*") if p.is_file()}
    found = check_db(tmp_path / "a")
    assert (found.products, found.with_attributes, found.chains, found.catalog_entries) == (130, 130, 3, 130)
    assert any("1,181,436" in w for w in found.warnings)
    # upstream's catalogue file naming: the first two category segments, slugged
    assert catalog_file_name("Home & Kitchen › Kitchen & Dining › Bakeware") == "home_kitchen_kitchen_dining.json"
    assert catalog_file_name("Electronics") is None
    assert (tmp_path / "a" / "product_catalog" / "home_kitchen_kitchen_dining.json").is_file()


def test_the_check_reports_every_problem_with_where_it_is(tmp_path: Path) -> None:
    db = write_db(tmp_path / "db", [record(f"B{i}", "x") for i in range(8)])
    items = json.loads((db / ITEMS).read_text())
    for r in items[:7]:
        del r["images"]
    items[7]["customization_options"] = {"color": ["red"]}
    (db / ITEMS).write_text(json.dumps(items))
    (db / "product_catalog" / "bad.json").write_text('[{"asin": "B1"}]')
    with pytest.raises(ProductDbError) as raised:
        check_db(db)
    text = str(raised.value)
    assert "items_shuffle.json[0]: missing images" in text and "... and 2 more: missing fields" in text
    assert "items_shuffle.json[7] (B7): customization_options" in text
    assert "product_catalog/bad.json[0]: expected asin, name and product_category" in text
    (db / DOMAIN).unlink()
    with pytest.raises(ProductDbError, match="lacks domain_data.json"):
        check_db(db)


# -- search ----------------------------------------------------------------------------------------------
def test_search_ranks_by_bm25_with_ties_in_file_order() -> None:
    docs = ["red stand mixer", "blue hand mixer", "red stand mixer", "glass bowl", "the and of"]
    index = SearchIndex.build(docs)
    assert index.search("stand mixer") == [0, 2, 1]  # 0 and 2 tie: file order; 1 matches one term
    assert index.search("bowls") == [3]  # Porter stemming
    assert index.search("the of") == [] and index.search("zebra") == []  # stop words, unknown words: nothing
    assert index.search("mixer", n=2) == [0, 1]
    # a repeated query term counts twice (Lucene's bag of words): "blue blue" outranks "red"
    assert SearchIndex.build(["red mixer", "blue mixer"]).search("red blue blue") == [1, 0]


def test_the_index_is_cached_and_a_changed_or_damaged_cache_is_rebuilt(tmp_path: Path) -> None:
    db = write_db(tmp_path / "db", [record("B1", "Stand Mixer"), record("B2", "Glass Bowl")])
    first = ProductStore.open(db)
    assert first.index_built and [h.asin for h in first.search("mixer")] == ["B1"]
    assert not ProductStore.open(db).index_built  # from the cache
    index_dir = store_module.db_cache_dir(db) / "index"
    damaged = next(p for p in index_dir.iterdir() if p.suffix == ".npy")
    data = damaged.read_bytes()
    damaged.write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))
    assert ProductStore.open(db).index_built  # checksum mismatch: rebuilt, not trusted
    write_db(db, [record("B3", "Glass Bowl"), record("B1", "Stand Mixer")])  # the database changed
    again = ProductStore.open(db)
    assert again.index_built and [h.asin for h in again.search("mixer")] == ["B1"]


def test_checksums_and_names_come_from_the_files(tmp_path: Path) -> None:
    db = write_db(tmp_path / "db", [record("b1", "Stand Mixer"), record("B2", "", small_description="")])
    sums = db_checksums(db)
    assert set(sums) == {ITEMS, ATTRIBUTES, DOMAIN, "product_catalog/"}
    names = product_names(db, {"B1", "B2", "B9"})
    assert set(names) == {"B1", "B2"} and names["B1"].db_name == "Stand Mixer" and names["B2"].db_name is None
    assert names["B1"].category == "Home & Kitchen › Kitchen & Dining › Mixers"
    (db / DOMAIN).unlink()
    with pytest.raises(ProductDbError, match="lacks domain_data.json"):
        db_checksums(db)


# -- pages and actions -------------------------------------------------------------------------------------
@pytest.fixture
def shop(tmp_path: Path) -> Session:
    records = [record(f"B{i:09d}", f"Stand Mixer {i}", pricing=f"${20 + i}.00") for i in range(12)]
    records.append(record("B999999999", "Hand Mixer Deluxe", pricing="$5.50 - $9.00", average_rating=4.1,
                          customization_options={"color": [{"value": "Red"}, {"value": "Blue"}]},
                          small_description=["quiet", "light"]))
    return Session(LocalStore(ProductStore.open(write_db(tmp_path / "db", records))), INSTRUCTION)


def act(session: Session, *actions: str) -> str:
    for action in actions:
        asyncio.run(session.act(action))
    return session.text()


def test_the_search_and_results_pages_are_the_rendered_templates(shop: Session) -> None:
    assert shop.text() == search_page(INSTRUCTION) == "WebShop [SEP] Instruction: [SEP] Buy a mixer.\n [SEP] Search"
    page = act(shop, "search[Stand Mixer]")
    assert page.startswith("Instruction: [SEP] Buy a mixer.\n [SEP] Back to Search [SEP] Page 1 (Total results: 13) "
                           "[SEP] Next > [SEP] B000000000 [SEP] Stand Mixer 0 [SEP] $20.0 [SEP] B000000001 [SEP] ")
    assert page.count("[SEP] $") == 10  # 10 per page
    second = act(shop, "click[next >]")
    assert " [SEP] Page 2 (Total results: 13) [SEP] < Prev [SEP] Next > [SEP] B000000010 [SEP] " in second
    assert second.count("[SEP] $") == 3
    assert "Page 3 (Total results: 13) [SEP] < Prev [SEP] Next >" in act(shop, "click[Next >]")  # past the end: empty
    assert act(shop, "click[< Prev]", "click[< prev]").startswith(page[:60])


def test_an_item_page_has_its_options_price_rating_and_buttons(shop: Session) -> None:
    act(shop, "search[hand mixer deluxe]")
    item = act(shop, "click[B999999999]")
    assert item == ("Instruction: [SEP] Buy a mixer.\n [SEP] Back to Search [SEP] < Prev [SEP] color [SEP] red [SEP] "
                    "blue [SEP] Hand Mixer Deluxe [SEP] Price: $5.5 to $9.0 [SEP] Rating: 4.1 [SEP] Description [SEP] "
                    "Features [SEP] Reviews [SEP] Buy Now")
    assert set(shop.clickables()) == {"back to search", "< prev", "description", "features", "reviews", "buy now",
                                      "red", "blue"}
    act(shop, "click[Blue]")
    assert shop.options == {"color": "blue"} and shop.text() == item
    assert act(shop, "click[Features]").endswith("< Prev [SEP] quiet [SEP] light")
    assert act(shop, "click[< Prev]") == item
    assert act(shop, "click[Reviews]").endswith("[SEP] < Prev")  # no reviews: upstream's loader keeps none
    assert act(shop, "click[< Prev]", "click[< Prev]").startswith("Instruction: [SEP] Buy a mixer.\n [SEP] Back to "
                                                                  "Search [SEP] Page 1")
    assert shop.options == {}


def test_anything_else_leaves_the_page_as_it_is(shop: Session) -> None:
    page = act(shop, "search[stand mixer]")
    for action in ("click[buy now]", "click[B999999999]", "click[search]", "search[]", "jump[x]", "click me",
                   "search[two\nlines]"):
        assert act(shop, action) == page, action
    assert asyncio.run(shop.act("click[b000000003]")) is False and shop.page == "item"  # ASINs match lower-cased
    assert asyncio.run(shop.act("click[Buy Now]")) is True and shop.purchased == "B000000003"
    assert act(shop, "click[back to search]") == search_page(INSTRUCTION)


def test_actions_parse_as_upstream_parses_them() -> None:
    assert parse_action("search[red mixer]") == ("search", "red mixer")
    assert parse_action("click[a] and click[b]") == ("click[a] and click", "b")  # greedy, as re.match(r"(.+)\[(.+)\]")
    assert parse_action("search[]") == ("search[]", None) and parse_action("done") == ("done", None)
