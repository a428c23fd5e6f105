"""Fixtures for the τ-bench tests: the real data, fresh databases, and a call helper.

Expected values in these tests come from TOOLS.md, gold_hashes.json or the raw data files read
with plain ``json`` — never from the implementation under test.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from flowstate.chat import ChatMessage, Completion
from flowstate.environment import ToolCall, ToolResult
from pipeline.benchmarks.taubench import DATA_ENV_VAR, TauBenchDataError, fresh_db, load_tasks, toolkit_for
from pipeline.benchmarks.taubench.database import EpisodeDB
from pipeline.benchmarks.taubench.toolkit import ToolKit
from tests.pipeline.conftest import DATA_DIR


def data_dir() -> Path:
    return Path(os.environ.get(DATA_ENV_VAR) or DATA_DIR)


@pytest.fixture(scope="session", autouse=True)
def taubench_data() -> Iterator[Path]:
    """Point FLOWSTATE_DATA at the shared data; a missing or corrupt data set fails the tests."""
    root = data_dir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(DATA_ENV_VAR, str(root))
        try:
            for domain in ("airline", "retail"):
                load_tasks(domain)
        except TauBenchDataError as exc:
            pytest.fail(f"τ-bench data unavailable: {exc}")
        yield root


@cache
def raw_db(domain: str) -> dict[str, Any]:
    """The database file as plain JSON (ground truth for expected values)."""
    return json.loads((data_dir() / "taubench" / domain / "db.json").read_text())


@cache
def gold_hashes() -> dict[str, Any]:
    return json.loads((data_dir() / "taubench" / "gold_hashes.json").read_text())["domains"]


@cache
def contract() -> str:
    return (data_dir() / "taubench" / "TOOLS.md").read_text()


class FixedReplyPolicy:
    """A deterministic Policy (test fixture): always the same reply; what it was sent is recorded."""

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.calls: list[list[ChatMessage]] = []

    async def complete(
        self, messages: Sequence[ChatMessage], *, json_schema: Mapping[str, Any] | None = None
    ) -> Completion:
        self.calls.append(list(messages))
        return Completion(text=self.reply)


@dataclass
class Session:
    """A fresh database with its tools, and terse ways to call them."""

    db: EpisodeDB
    tools: ToolKit

    def call(self, name: str, arguments: Any = None) -> ToolResult:
        return self.tools.execute(ToolCall(name=name, arguments={} if arguments is None else arguments))

    def ok(self, name: str, **arguments: Any) -> Any:
        """Call a tool that must succeed; JSON results are decoded, plain strings returned."""
        result = self.call(name, arguments)
        assert not result.error, result.content
        try:
            return json.loads(result.content)
        except json.JSONDecodeError:
            return result.content

    def err(self, name: str, **arguments: Any) -> str:
        """Call a tool that must fail; the error text without the ``Error: `` prefix."""
        result = self.call(name, arguments)
        assert result.error, result.content
        assert result.content.startswith("Error: ")
        return result.content.removeprefix("Error: ")

    def record(self, collection: str, key: str) -> dict[str, Any]:
        return json.loads(json.dumps(self.db[collection][key]))

    def live_records(self) -> dict[str, dict[str, Any]]:
        """The episode's current records by reference (no copy), for reference dumps."""
        return {name: dict(table.items()) for name, table in self.db.tables.items()}

    def slow_hash(self) -> str:
        """§1.4 computed the plain way: one ``json.dumps(sort_keys=True)`` of the whole DB."""
        text = json.dumps(self.live_records(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()


def new_session(domain: str) -> Session:
    db = fresh_db(domain)
    return Session(db, toolkit_for(db))


@pytest.fixture
def airline() -> Session:
    return new_session("airline")


@pytest.fixture
def retail() -> Session:
    return new_session("retail")


def canonical_reservation(raw: dict[str, Any]) -> dict[str, Any]:
    """A reservation from the file in the canonical form of TOOLS.md §1.2–1.3."""
    return {
        **{key: raw[key] for key in ("reservation_id", "user_id", "origin", "destination", "flight_type", "cabin")},
        "flights": [
            {key: segment[key] for key in ("flight_number", "origin", "destination", "date", "price")}
            for segment in raw["flights"]
        ],
        **{key: raw[key] for key in ("passengers", "payment_history", "created_at", "total_baggages",
                                     "nonfree_baggages", "insurance")},
        "status": raw.get("status"),
    }


ORDER_OPTIONAL = (
    "cancel_reason",
    "exchange_items",
    "exchange_new_items",
    "exchange_payment_method_id",
    "exchange_price_difference",
    "return_items",
    "return_payment_method_id",
)


def canonical_order(raw: dict[str, Any]) -> dict[str, Any]:
    return {**raw, **{key: raw.get(key) for key in ORDER_OPTIONAL}}
