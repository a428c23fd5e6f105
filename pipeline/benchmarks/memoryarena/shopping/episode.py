"""A bundled-shopping task as an environment: each product step is one store episode (CONTRACT §5.1).

Step k's request is its first observation, the search page with I_k. The agent acts through two
tools mapped one to one onto upstream's actions (a documented adaptation to the tool-call protocol
every method shares): ``search(keywords)`` sends ``search[keywords]`` and ``click(value)`` sends
``click[value]``; each call is one action and its result is the next page. A step ends at its
purchase (the result is upstream's purchase summary), at the 20th action, or at the soft exit when
the same action comes 7 times in a row (the 7th is not executed); the next step then starts on a
fresh search page. A text reply ends the step without a purchase (upstream would send it as an
action that does nothing). Memory methods store one entry per action (§5.4).
"""

from __future__ import annotations

import json
import re
from typing import Any

from flowstate import RequestOutcome, ToolCall, ToolResult
from pipeline.benchmarks.memoryarena.data import ShoppingTask, prompts
from pipeline.benchmarks.memoryarena.shopping.pages import Session, search_page
from pipeline.benchmarks.memoryarena.shopping.store import StoreClient
from pipeline.benchmarks.memoryarena.subtasks import shopping_memory_entry, shopping_prompts
from pipeline.benchmarks.requests import FixedRequests

MAX_ACTIONS = 20  # upstream's max_steps per step episode
SOFT_EXIT_REPEATS = 7
RULE = "=" * 60
_SUMMARY = re.compile(r"Purchase #(\d+):\s*([A-Z0-9]{10})\s*\(\$([\d\.,]+)\)")
_ITEM_PRICE = re.compile(r"Price:\s*\$\s*([\d,]+\.?\d*)")
_ANY_PRICE = re.compile(r"\$\s*([\d,]+\.?\d*)")
_AFTER_ACTION = re.compile(r"(?i)action:")
ADAPTATION = ("\nIn this harness each action is one tool call: search(keywords) sends search[keywords], "
              "click(value) sends click[value].")

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "search", "description": "Send search[keywords]: search the store for products.",
        "parameters": {"type": "object", "properties": {"keywords": {"type": "string", "description": "the search keywords"}},
                       "required": ["keywords"]}}},
    {"type": "function", "function": {
        "name": "click", "description": "Send click[value]: click a button, a product ID or an option value of the "
                                        "current page (e.g. Buy Now, Next >, < Prev, Back to Search).",
        "parameters": {"type": "object", "properties": {"value": {"type": "string", "description": "what to click"}},
                       "required": ["value"]}}},
]
_ARGUMENT = {"search": "keywords", "click": "value"}


def task_policy() -> str:
    """The agent's instructions: upstream's system prompt and conversation-start text, verbatim, and
    one sentence on the tool mapping."""
    p = prompts()["bundled_shopping"]
    return p["system_prompt"] + "\n\n" + p["conversation_start"][0]["content"] + ADAPTATION


def tools_text() -> str:
    return "\n".join(json.dumps(t, ensure_ascii=False) for t in TOOLS)


def action_of(call: ToolCall) -> str:
    """The upstream action a tool call sends (an unknown tool or argument sends a no-op text)."""
    argument = call.arguments.get(_ARGUMENT.get(call.name, ""), "") if isinstance(call.arguments, dict) else ""
    if call.name not in _ARGUMENT or not isinstance(argument, str):
        return f"{call.name}({json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)})"
    return f"{call.name}[{argument}]"


def repeat_key(action: str) -> str:
    """What the soft exit compares: the text after the first ``action:``, else the stripped text."""
    parts = _AFTER_ACTION.split(action, maxsplit=1)
    return parts[1].strip() if len(parts) == 2 else action.strip()


def purchase_summary(asin: str, price: float) -> str:
    return (f"{RULE}\nWEBSHOPPLUS TASK COMPLETED\n{RULE}\n\nPurchases Made: 1\nRequired Targets: 1\n"
            f"Total Expense: ${price:.2f}\n\nPurchased Items:\n  Purchase #1: {asin} (${price:.2f})\n{RULE}")


def purchased_asin(observation: str) -> str | None:
    """The ASIN a step bought, read back from its purchase summary."""
    found = _SUMMARY.search(observation)
    return found.group(2) if found else None


def _viewed_price(observation: str) -> float | None:
    """Upstream's price tracking: ``Price: $x`` on the page, else its first ``$x``, kept if 1 < x < 100000."""
    for pattern in (_ITEM_PRICE, _ANY_PRICE):
        found = pattern.search(observation)
        if found:
            try:
                price = float(found.group(1).replace(",", ""))
            except ValueError:
                continue
            if 1.0 < price < 100000.0:
                return price
    return None


class ShoppingEpisode(FixedRequests):
    def __init__(self, task: ShoppingTask, store: StoreClient, *, max_actions: int = MAX_ACTIONS) -> None:
        self.instructions = shopping_prompts(task)
        super().__init__([search_page(i) for i in self.instructions])
        self.task = task
        self.store = store
        self.max_actions = max_actions
        self.session: Session | None = None
        self._turns: dict[int, list[str]] = {}  # request -> its memory entries
        self._last: str | None = None
        self._repeats = 0
        self._viewing: float | None = None

    def _next(self) -> str | None:
        query = super()._next()
        if query is not None:
            self.session = Session(self.store, self.instructions[self.current - 1])
            self._last, self._repeats, self._viewing = None, 0, None
        return query

    async def run_tool(self, call: ToolCall) -> ToolResult:
        assert self.session is not None
        if self.request_done:  # a purchase or an exit earlier in the same reply
            return ToolResult(content="Task already completed.", error=True)
        action = action_of(call)
        before = self.session.text()
        key = repeat_key(action)
        self._repeats = self._repeats + 1 if key == self._last else 1
        self._last = key
        error = call.name not in _ARGUMENT
        if self._repeats >= SOFT_EXIT_REPEATS:
            after = (f"{before}\n\n{RULE}\nWEBSHOPPLUS SOFT EXIT\n{RULE}\nReason: repeat_action>={SOFT_EXIT_REPEATS}\n"
                     f"Repeat Action: {key}\nRepeat Count: {self._repeats}\n{RULE}")
            self.end_current_request()
        else:
            self._viewing = _viewed_price(before) or self._viewing
            if await self.session.act(action):
                asin = self.session.purchased or ""
                after = purchase_summary(asin, self._viewing if self._viewing is not None else 0.0)
                self.end_current_request()
            else:
                after = self.session.text()
        turns = self._turns.setdefault(self.current, [])
        turns.append(shopping_memory_entry(len(turns) + 1, before, action, after, self.request_done))
        if len(turns) >= self.max_actions:
            self.end_current_request()
        return ToolResult(content=after, error=error)

    def memory_entries(self, outcome: RequestOutcome) -> list[str]:
        return list(self._turns.get(outcome.index, []))
