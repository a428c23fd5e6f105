"""WebShop's text environment: one shopper's pages, clickables and actions (CONTRACT §5.2).

A page's text is its visible texts, each stripped, joined with `` [SEP] ``; the goal text is the step's
instruction I_k, placed where upstream's replacement puts it (unstripped). Search and results pages
follow the rendered templates exactly; item pages and their sub-pages (Description, Features,
Reviews) follow the item-page template as read, not rendered: **approximate**. Reviews are always
empty (upstream's loader sets them so).

Actions: ``search[keywords]`` (non-empty) from any page, or ``click[value]`` naming a clickable of the
current page other than ``search`` (button texts and ASINs lower-cased, option values); the argument
is lower-cased; anything else leaves the page as it is. ``click[buy now]`` on an item page buys it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from pipeline.benchmarks.memoryarena.shopping.productdb import Product
from pipeline.benchmarks.memoryarena.shopping.store import Hit, StoreClient

SEP = " [SEP] "
PER_PAGE = 10
BUY, NEXT, PREV, BACK = "Buy Now", "Next >", "< Prev", "Back to Search"
SUB_PAGES = ("Description", "Features", "Reviews")
_ACTION = re.compile(r"(.+)\[(.+)\]")

Page = Literal["search", "results", "item", "Description", "Features", "Reviews"]


def parse_action(action: str) -> tuple[str, str | None]:
    """Upstream's parse: ``name[argument]`` (``.`` stops at a line break), else the whole text as a name."""
    found = _ACTION.match(action)
    return (action, None) if found is None else (found.group(1), found.group(2))


def _sub_page(button: str) -> Page:
    """The item page's tab a button opens (the item page's only other buttons act or navigate)."""
    match button:
        case "Description" | "Features" | "Reviews":
            return button
    raise ValueError(f"{button!r} opens no page")


def search_page(instruction: str) -> str:
    """The first observation of every step."""
    return SEP.join(["WebShop", "Instruction:", instruction, "Search"])


@dataclass
class Session:
    """One step episode's browser: its page and choices (the database is the store's)."""

    store: StoreClient
    instruction: str
    page: Page = "search"
    keywords: str | None = None
    page_number: int = 1
    hits: list[Hit] = field(default_factory=list)
    product: Product | None = None
    options: dict[str, str] = field(default_factory=dict)
    purchased: str | None = None  # the ASIN bought (upper-cased, as upstream's session keeps it)

    # -- what the shopper sees ----------------------------------------------------------------------
    def text(self) -> str:
        if self.page == "search":
            return search_page(self.instruction)
        head = ["Instruction:", self.instruction, BACK]
        if self.page == "results":
            shown = self.hits[(self.page_number - 1) * PER_PAGE: self.page_number * PER_PAGE]
            parts = [f"Page {self.page_number} (Total results: {len(self.hits)})",
                     *([PREV] if self.page_number > 1 else []), NEXT]
            for hit in shown:
                parts += [hit.asin, hit.title, hit.price_tag]
            return _join(head, parts)
        assert self.product is not None
        p = self.product
        if self.page == "item":
            parts = [PREV]
            for name, values in p.options.items():
                parts += [name, *values]
            parts += [p.title, f"Price: {p.price_tag}", f"Rating: {p.rating}", *SUB_PAGES, BUY]
            return _join(head, parts)
        body = {"Description": [p.description], "Features": list(p.bullet_points), "Reviews": []}[self.page]
        return _join(head, [PREV, *body])

    def clickables(self) -> dict[str, tuple[str, str]]:
        """Lower-cased clickable text -> (kind, detail): buttons, product links, option values."""
        if self.page == "search":
            return {"search": ("button", "")}
        found: dict[str, tuple[str, str]] = {BACK.lower(): ("button", BACK)}
        if self.page == "results":
            if self.page_number > 1:
                found[PREV.lower()] = ("button", PREV)
            found[NEXT.lower()] = ("button", NEXT)
            for hit in self.hits[(self.page_number - 1) * PER_PAGE: self.page_number * PER_PAGE]:
                found[hit.asin.lower()] = ("product", hit.asin)
            return found
        found[PREV.lower()] = ("button", PREV)
        if self.page == "item":
            assert self.product is not None
            for name in SUB_PAGES:
                found[name.lower()] = ("button", name)
            found[BUY.lower()] = ("button", BUY)
            for option, values in self.product.options.items():
                for value in values:
                    found[value] = ("option", option)
        return found

    # -- acting -------------------------------------------------------------------------------------------
    async def act(self, action: str) -> bool:
        """Apply one action; True when it was a purchase."""
        name, argument = parse_action(action)
        if argument is not None:
            argument = argument.lower()
        if name == "search" and argument:
            await self._search(argument)
            return False
        clickables = self.clickables()
        if name != "click" or argument is None or argument == "search" or argument not in clickables:
            return False
        kind, detail = clickables[argument]
        if kind == "product":
            self.product = await self.store.product(detail)
            self.page = "item"
        elif kind == "option":
            self.options[detail] = argument
        elif detail == BUY:
            assert self.product is not None
            self.purchased = self.product.asin.upper()
            return True
        elif detail == BACK:
            self.page, self.keywords, self.hits, self.product, self.options = "search", None, [], None, {}
        elif detail == NEXT:
            self.page_number += 1
        elif detail == PREV:
            if self.page == "results":
                self.page_number -= 1
            elif self.page == "item":
                self.page, self.product, self.options = "results", None, {}
            else:
                self.page = "item"
        else:
            self.page = _sub_page(detail)
        return False

    async def _search(self, keywords: str) -> None:
        self.keywords = keywords
        self.hits = await self.store.search(self.keywords)
        self.page, self.page_number, self.product, self.options = "results", 1, None, {}


def _join(head: list[str], parts: list[str]) -> str:
    """The instruction (head[1]) stays as it is; other texts are stripped and empty ones dropped."""
    texts = [head[0], head[1], *(t.strip() for t in [*head[2:], *parts])]
    return SEP.join(t for i, t in enumerate(texts) if i == 1 or t)
