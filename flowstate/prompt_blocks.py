"""Where a prompt stops repeating the previous call of its conversation, and which block holds that point.

A prefix-caching engine skips the leading tokens a call shares with what it computed for the previous
call: that call's prompt and its completion. :func:`departure` finds the first character where a
prompt departs from them and names the block it falls in, the system message or a slot of the
method's input template (``active_state``, ``observation``, ``query``, ...), with how that slot's
value changed. It explains a layout's cache figures (``perf/prompt_cache.py``) and lets tests
check where a layout breaks the prefix; the token counts themselves come from a tokenizer.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from flowstate.chat import ChatMessage
from flowstate.prompts import slot_spans

#: How a slot's value changed where the prompt departs: a list rendered one item per line (the index,
#: the Active State) gained items at its end, changed an item (in place or moved), gained one before
#: others, lost one, or only reordered them; any other value grew at its end or was replaced.
Change = Literal["appended", "changed", "inserted", "removed", "moved", "replaced"]


@dataclass(frozen=True)
class Departure:
    """The first point where a prompt differs from the previous call's prompt and completion."""

    message: int  # index of the message in the prompt
    offset: int  # characters into that message's content
    block: str  # the message's role for a message outside the template, else the slot's name
    change: Change


def departure(previous: Sequence[ChatMessage], current: Sequence[ChatMessage], template: str) -> Departure | None:
    """Where ``current`` first departs from ``previous`` (the previous call's messages with its reply
    as the last, assistant, message), ``template`` being the input template that made the user
    message; None when ``current`` repeats it from start to end."""
    for i, message in enumerate(current):
        before = previous[i] if i < len(previous) else None
        if before is not None and before == message:
            continue
        if before is None or before.role != message.role:
            return Departure(i, 0, message.role, "replaced")
        offset = len(os.path.commonprefix([before.content, message.content]))
        if message.role != "user":
            return Departure(i, offset, message.role, "changed")
        block = _slot_at(slot_spans(template, message.content), offset)
        if block is None:
            return Departure(i, offset, "template", "changed")
        old, new = (text[slice(*slot_spans(template, text)[block])] for text in (before.content, message.content))
        return Departure(i, offset, block, value_change(old, new))
    return None


def _slot_at(spans: dict[str, tuple[int, int]], offset: int) -> str | None:
    """The slot whose value holds ``offset``, else the last one ending at or before it (its value
    ended where the other prompt's went on)."""
    for name, (start, end) in spans.items():
        if start <= offset < end:
            return name
    before = [(end, name) for name, (_, end) in spans.items() if end <= offset]
    return max(before)[1] if before else None


def value_change(old: str, new: str) -> Change:
    """How a slot's value changed at its first difference."""
    old_items, new_items = _items(old), _items(new)
    if old_items is None or new_items is None:
        return "appended" if new.startswith(old) else "replaced"
    i = next((i for i, (a, b) in enumerate(zip(old_items, new_items, strict=False)) if a != b),
             min(len(old_items), len(new_items)))
    if i == len(old_items):
        return "appended"
    if i == len(new_items):
        return "removed"
    old_key, new_key = _key(old_items[i]), _key(new_items[i])
    if old_key == new_key:
        return "changed"
    if old_key not in {_key(item) for item in new_items}:
        return "removed"
    if old_items[i] not in new_items:  # the same item, changed and shown elsewhere
        return "changed"
    if new_key not in {_key(item) for item in old_items}:
        return "inserted"
    return "moved"


def _items(text: str) -> list[str] | None:
    """The items of a JSON list rendered one per line (``json_lines``), else None."""
    if text == "[]":
        return []
    lines = text.split("\n")
    if len(lines) < 3 or lines[0] != "[" or lines[-1] != "]":
        return None
    return [line.removesuffix(",") for line in lines[1:-1]]


def _key(item: str) -> str:
    """What identifies an item across prompts: a state's id, an index entry's request, else the item."""
    try:
        value = json.loads(item)
    except ValueError:
        return item
    if isinstance(value, dict):
        for field in ("state_id", "query_id"):
            if field in value:
                return f"{field}={value[field]}"
    return item
