"""FlowState's input layouts: the paper's, and one that keeps more of each prompt a prefix of the next.

A prefix-caching engine (vLLM, llama.cpp) skips the leading tokens a call shares with the previous
call of the same conversation. In the paper's input (appendix B.3) the user query, fixed for the
whole request, comes last, after the per-step blocks; and the Active State lists disclosed
historical states ahead of the request's own ones, each in insertion order. So every step
recomputes the query, and a disclosure or an edit recomputes every state listed after it.

``cache_friendly`` (the ``prompt_layout`` option; off by default: the paper's layout is the method)
shows the same blocks with the same contents in another order:

- the per-request blocks first: the Historical State Index (fixed for the request, and between
  requests it only gains entries at its end), then the user query;
- then the Active State, its states in the order they last changed: a state keeps its place while
  its rendering is unchanged; a new, disclosed or edited one goes to the end; a removed one leaves;
- then the per-step blocks: the rejection feedback (when enabled) and the latest observation.

Within a request a step's prompt then shares with the previous one everything up to the first state
that changed or went away (or, if none did, up to the new observation); a request's first prompt
shares the previous request's index. The index and the Active State keep their labels, each in an
``<agent_status>`` block of its own (the tags of the second cost a few tokens per call).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from enum import Enum
from functools import cache
from typing import Any

from flowstate.prompts import edited, template

PAPER_INPUT = "flowstate_input"
_QUERY_BLOCK = "\n\n<user_query>\n{query}\n</user_query>"
_INDEX = "Historical State Index:\n{historical_state_index}\n"


class PromptLayout(str, Enum):
    PAPER = "paper"
    CACHE_FRIENDLY = "cache_friendly"


def layout_of(options: object) -> PromptLayout | None:
    """The layout a method's options choose; None for a method without the option."""
    return getattr(options, "prompt_layout", None)


@cache
def input_template(layout: PromptLayout) -> str:
    """The input template of ``layout``, made from the paper's: ``cache_friendly`` moves the index
    and the query ahead of the rest and changes nothing else (an edit that no longer applies to the
    paper's template is an error)."""
    paper = template(PAPER_INPUT)
    if layout is PromptLayout.PAPER:
        return paper
    return "<agent_status>\n" + _INDEX + "</agent_status>" + _QUERY_BLOCK + "\n\n" + edited(paper, remove=(_QUERY_BLOCK, _INDEX))


def layout_sha256(layout: PromptLayout) -> str:
    """What a layout's inputs are built from (its template and how it orders the Active State), hashed:
    recorded per cell in a sweep's manifest beside the hash of all templates."""
    spec = {"layout": layout.value, "input_template": input_template(layout),
            "active_state_order": "last_changed" if layout is PromptLayout.CACHE_FRIENDLY else "disclosed_then_current"}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


class ChangeOrder:
    """The Active State's items in the order they last changed (``cache_friendly``).

    Each call gets the items as the runtime lists them and returns the same items reordered: those
    unchanged since the previous call first, in their previous order, then the new or changed ones
    in the runtime's order. Items are the rendered states (dicts with a ``state_id``)."""

    def __init__(self) -> None:
        self._shown: dict[str, dict[str, Any]] = {}

    def arrange(self, items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        now = {item["state_id"]: item for item in items}
        if len(now) != len(items):
            raise ValueError("Active State items with the same state_id")
        shown = {sid: item for sid, item in self._shown.items() if now.get(sid) == item}
        shown.update((sid, item) for sid, item in now.items() if sid not in shown)
        self._shown = shown
        return list(shown.values())
