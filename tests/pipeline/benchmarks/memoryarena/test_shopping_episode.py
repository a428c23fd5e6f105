"""A shopping task as an environment (one store episode per product step: limits, soft exit, the
purchase summary, memory entries) and its grading from the transcript (CONTRACT §5.1–5.5)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from flowstate import ChatMessage, Completion, RequestEnd, RequestOutcome, ToolCall
from pipeline.benchmarks.base import EpisodeRecord
from pipeline.benchmarks.memoryarena.benchmark import MEMORYARENA, MemoryArenaCell, ScriptedJudge
from pipeline.benchmarks.memoryarena.data import ShoppingTask
from pipeline.benchmarks.memoryarena.shopping.episode import (
    ShoppingEpisode,
    purchase_summary,
    purchased_asin,
    repeat_key,
    task_policy,
)
from pipeline.benchmarks.memoryarena.shopping.generate import example_db
from pipeline.benchmarks.memoryarena.shopping.grading import name_from_pages
from pipeline.benchmarks.memoryarena.shopping.pages import search_page
from pipeline.benchmarks.memoryarena.shopping.store import LocalStore, ProductStore
from pipeline.benchmarks.memoryarena.subtasks import shopping_prompts
from pipeline.benchmarks.transcript import TranscriptMessage
from tests.pipeline.benchmarks.memoryarena.conftest import catalog, example_tasks
from tests.pipeline.conftest import DATA_DIR

CELL = MemoryArenaCell(domain="bundled_shopping", source="examples")


@pytest.fixture(scope="module")
def store() -> LocalStore:
    return LocalStore(ProductStore.open(example_db(DATA_DIR)))


@pytest.fixture
def task() -> ShoppingTask:
    return example_tasks("bundled_shopping")[0]


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(name=name, arguments=arguments)


def run(env: ShoppingEpisode, *calls: ToolCall) -> list[str]:
    return [r.content for r in asyncio.run(env.execute(list(calls)))]


def buy(env: ShoppingEpisode, asin: str) -> str:
    """Search the product's name, open it, buy it: the last observation."""
    name = catalog()[asin]["name"]
    return run(env, call("search", keywords=name))[0] and run(env, call("click", value=asin))[0] and \
        run(env, call("click", value="Buy Now"))[0]


def test_each_step_starts_on_the_search_page_with_its_instruction(task: ShoppingTask, store: LocalStore) -> None:
    env = ShoppingEpisode(task, store)
    assert env.requests == [search_page(i) for i in shopping_prompts(task)]
    assert asyncio.run(env.first_request()) == env.requests[0]
    assert "search[keywords]" in task_policy() and task_policy().startswith("You are a WebShop shopping agent.")


def test_a_purchase_ends_the_step_with_upstreams_summary(task: ShoppingTask, store: LocalStore) -> None:
    env = ShoppingEpisode(task, store)
    asyncio.run(env.first_request())
    target = task.answers[0].target_asin
    summary = buy(env, target)
    price = float(catalog()[target]["pricing"].strip("$"))
    assert summary == purchase_summary(target, price) == (
        "=" * 60 + "\nWEBSHOPPLUS TASK COMPLETED\n" + "=" * 60 + f"\n\nPurchases Made: 1\nRequired Targets: 1\n"
        f"Total Expense: ${price:.2f}\n\nPurchased Items:\n  Purchase #1: {target} (${price:.2f})\n" + "=" * 60)
    assert env.request_done and purchased_asin(summary) == target
    # later calls of the same reply do nothing; the next step starts afresh
    assert run(env, call("click", value="Buy Now")) == ["Task already completed."]
    assert asyncio.run(env.end_request(RequestEnd.ENVIRONMENT)) == env.requests[1]
    assert env.session is not None and env.session.page == "search"
    entries = env.memory_entries(RequestOutcome(index=1, query=env.requests[0], ended=RequestEnd.ENVIRONMENT,
                                                final_response=None, steps=[]))
    assert len(entries) == 3
    assert entries[0].startswith(f"Step 1:\nUser Instruction: {env.requests[0]}\nAgent Action: search[")
    assert entries[0].endswith("\nDone: False") and entries[2].endswith(f"Env Observation: {summary}\nDone: True")


def test_the_seventh_identical_action_is_a_soft_exit_and_is_not_executed(task: ShoppingTask, store: LocalStore) -> None:
    env = ShoppingEpisode(task, store)
    asyncio.run(env.first_request())
    pages = run(env, *[call("click", value="Next >")] * 6)  # a no-op on the search page, six times
    assert pages == [env.requests[0]] * 6 and not env.request_done
    last = run(env, call("click", value="Next >"))[0]
    assert last.startswith(env.requests[0] + "\n\n" + "=" * 60 + "\nWEBSHOPPLUS SOFT EXIT\n")
    assert "Reason: repeat_action>=7\nRepeat Action: click[Next >]\nRepeat Count: 7" in last and env.request_done
    # a different action in between starts the count again
    other = ShoppingEpisode(task, store)
    asyncio.run(other.first_request())
    run(other, *[call("click", value="x")] * 6, call("search", keywords="mixer"), *[call("click", value="x")] * 6)
    assert not other.request_done
    assert repeat_key("Thought: look\nAction: search[bowl]") == "search[bowl]" == repeat_key("  search[bowl] ")


def test_the_action_limit_ends_a_step_without_a_purchase(task: ShoppingTask, store: LocalStore) -> None:
    env = ShoppingEpisode(task, store, max_actions=3)
    asyncio.run(env.first_request())
    run(env, call("search", keywords="mixer"), call("search", keywords="bowl"))
    assert not env.request_done
    observation = run(env, call("lookup", query="x"))  # an unknown tool: an action that does nothing
    assert env.request_done and "Results" not in observation[0]
    assert asyncio.run(env.execute([call("lookup")]))[0].error


def _transcript(task: ShoppingTask, store: LocalStore, bought: list[str | None]) -> list[TranscriptMessage]:
    env = ShoppingEpisode(task, store)
    asyncio.run(env.first_request())
    for asin in bought:
        if asin:
            buy(env, asin)
        asyncio.run(env.end_request(RequestEnd.ENVIRONMENT))
    return env.transcript


def grade(task: ShoppingTask, transcript: list[TranscriptMessage], judge: Any = None):
    return asyncio.run(MEMORYARENA.grade(CELL, str(task.id), EpisodeRecord(transcript=transcript,
                                                                           termination="requests_done"), judge))


def test_grading_reads_each_steps_purchase_from_its_summary(task: ShoppingTask, store: LocalStore) -> None:
    targets = [a.target_asin for a in task.answers]
    everything = grade(task, _transcript(task, store, targets))
    assert (everything.success, everything.reward) == (True, 1.0)
    assert [r.reason for r in everything.requests] == ["asin_match"] * 6
    # step 2 bought nothing, step 3 another product: PS is the share of successful steps
    options = [asin for asin in catalog() if asin[:8] == targets[2][:8] and asin != targets[2]]
    partly = grade(task, _transcript(task, store, [targets[0], None, options[0], *targets[3:]]))
    reasons = [r.reason for r in partly.requests]
    assert reasons[:3] == ["asin_match", "no_purchase", "computed"] and not partly.success
    assert partly.reward == pytest.approx(sum(r.correct for r in partly.requests) / 6)
    assert partly.metrics["avg_reward"] == pytest.approx(sum(r.score for r in partly.requests) / 6)
    detail = json.loads(partly.detail_json)["subtasks"][2]
    assert detail["name_similarity"] > 0 and detail["category_similarity"] > 0


def test_with_a_judge_the_attributes_are_judged_and_its_reply_counts(task: ShoppingTask, store: LocalStore) -> None:
    targets = [a.target_asin for a in task.answers]
    wrong = next(asin for asin in catalog() if asin[:8] == targets[0][:8] and asin != targets[0])
    transcript = _transcript(task, store, [wrong, *targets[1:]])
    asked: list[list[ChatMessage]] = []

    class Garbage:
        async def complete(self, messages: Any, *, json_schema: Any = None) -> Completion:
            asked.append(list(messages))
            return Completion(text="no json here", model="fixture")

    graded = grade(task, transcript, Garbage())
    assert len(asked) == 3 and graded.requests[0].score == 0.0  # three attempts, then no attribute matches
    assert "Product name:\n" + catalog()[wrong]["name"] in asked[0][-1].content
    assert grade(task, transcript, ScriptedJudge()).requests[0].reason == "computed"  # the fixture judges by name
    assert graded.basis == "memoryarena: purchases, attribute judge"
    assert grade(task, transcript).basis == "memoryarena: purchases, string-matched attributes"


def test_a_name_the_database_lacks_comes_from_the_pages() -> None:
    pages = [TranscriptMessage(role="tool", content="Page 1 [SEP] B0SYNA0101 [SEP] Stand Mixer Red [SEP] $10.0"),
             TranscriptMessage(role="tool", content="B0SYNA0102\n$5.0\n"),
             TranscriptMessage(role="tool", content="bought B0SYNA0103: Blue Bowl")]
    assert name_from_pages(pages, "B0SYNA0101") == "Stand Mixer Red"
    assert name_from_pages(pages, "B0SYNA0102") is None  # only a price after it, and nothing beside it
    assert name_from_pages(pages, "B0SYNA0103") == "bought : Blue Bowl"  # the segment without the ASIN
    assert name_from_pages(pages, "B0SYNA0999") is None


def test_a_database_in_another_format_stops_the_sweep_before_it_starts(tmp_path, monkeypatch) -> None:
    from pipeline.benchmarks.memoryarena import benchmark
    from pipeline.benchmarks.memoryarena.shopping.productdb import ProductDbError
    from tests.pipeline.benchmarks.memoryarena.test_shopping_store import record, write_db

    db = write_db(tmp_path / "db", [record("B1", "x")])
    (db / "items_shuffle.json").write_text('{"products": []}')
    monkeypatch.setattr(benchmark, "shopping_db", lambda cell: db)
    with pytest.raises(ProductDbError, match=r"items_shuffle.json: expected '\['"):
        MEMORYARENA.data_checksums(CELL)
    (db / "domain_data.json").unlink()
    with pytest.raises(ProductDbError, match="lacks domain_data.json.*--with-shopping-db"):
        MEMORYARENA.data_checksums(CELL)
