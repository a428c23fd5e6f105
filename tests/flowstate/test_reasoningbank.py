"""ReasoningBank's mechanism, as MemoryArena's port runs it, on deterministic fixtures."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from flowstate import MethodCallers, RequestEnd, RequestOutcome, RequestStart
from flowstate.chat import SamplingOverride
from flowstate.data import MethodDataError
from flowstate.methods.reasoningbank import (
    EXTRACTION_HEADER,
    JUDGE_SYSTEM,
    PORT_INSTRUCTION,
    BankRecord,
    titles,
)
from tests.flowstate.fixtures import BagOfWordsEmbedderFixture, Driver, ScriptedPolicyFixture

ITEMS = ("# Memory Item 1\n## Title Check the fare class first\n## Description d\n## Content c\n\n"
         "# Memory Item 2\n## Title Confirm before booking\n## Description d\n## Content c")


def _memory(verdicts: list[str]) -> ScriptedPolicyFixture:
    """Judge replies from ``verdicts``; every extraction returns ITEMS."""
    script = []
    for verdict in verdicts:
        script += [verdict, ITEMS]
    return ScriptedPolicyFixture(script)


def _driver(memory: ScriptedPolicyFixture, embedder: BagOfWordsEmbedderFixture, **options) -> Driver:
    return Driver({"name": "reasoningbank", **options}, callers=MethodCallers(memory=memory, embeddings=embedder))


def _end(driver: Driver, entries: list[str]) -> None:
    asyncio.run(driver.session.end_request(RequestOutcome(index=driver.request, query="", ended=RequestEnd.RESPONSE,
                                                          final_response="done", steps=[], memory_entries=entries)))


def test_an_entry_is_judged_then_extracted_with_the_prompt_for_its_outcome_then_embedded(released_prompts):
    memory, embedder = _memory(["Success."]), BagOfWordsEmbedderFixture()
    driver = _driver(memory, embedder)
    driver.begin("book a flight")
    entry = "task: book a flight\n" + "x" * 5000
    _end(driver, [entry])
    judge, extraction = memory.calls
    assert judge[0].content == JUDGE_SYSTEM and judge[1].content.startswith(entry)
    released = (released_prompts / "methods/reasoningbank/swebench_successful_si.txt").read_text(encoding="utf-8")
    assert extraction[0].content == released.strip() and extraction[1].content == EXTRACTION_HEADER + entry
    assert memory.samplings == [SamplingOverride(temperature=0.0, max_tokens=128),
                                SamplingOverride(temperature=0.7, max_tokens=4096)]
    assert embedder.inputs[-1] == [entry[:4096]]  # the whole entry's first 4,096 characters
    record = driver.session.bank.records[0]
    assert record == BankRecord(task_id="0", memory_items=ITEMS.split("\n\n"), status="success")
    write = driver.session.records[-1]
    assert write.kind == "write" and write.payload["status"] == "success" and write.payload["items"] == 2
    assert write.payload["titles"] == ["Check the fare class first", "Confirm before booking"]


@pytest.mark.parametrize(("reply", "status"), [("fail", "fail"), ("FAIL.", "fail"), ("  Success\n", "success"),
                                               ("unsuccessful", "success")])  # the port's rule: "success" in reply
def test_the_outcome_is_success_exactly_when_the_reply_contains_success(released_prompts, reply, status):
    memory = _memory([reply])
    driver = _driver(memory, BagOfWordsEmbedderFixture())
    driver.begin("q")
    _end(driver, ["entry"])
    assert driver.session.bank.records[0].status == status
    released = (released_prompts / f"methods/reasoningbank/swebench_{'successful' if status == 'success' else 'failed'}_si.txt")
    assert memory.calls[1][0].content == released.read_text(encoding="utf-8").strip()


@pytest.mark.usefixtures("released_prompts")
def test_retrieval_embeds_the_instruction_wrapped_query_and_renders_the_top_five_records_whole():
    entries = [f"flight {i} to paris" if i % 2 else f"hotel {i} in rome" for i in range(7)]
    memory, embedder = _memory(["success"] * 7), BagOfWordsEmbedderFixture()
    driver = _driver(memory, embedder)
    driver.begin("first")
    _end(driver, entries)
    driver.request = 1
    driver.begin("a flight to paris")
    wrapped = f"Instruct: {PORT_INSTRUCTION}\nQuery: a flight to paris"
    assert embedder.inputs[-1] == [wrapped]
    retrieval = driver.session.records[-1]
    assert retrieval.kind == "retrieval" and retrieval.payload["stored"] == 7
    hits = retrieval.payload["hits"]
    # expected order: cosine x 100 over unit vectors, best first, ties in insertion order
    query = np.asarray(asyncio.run(embedder.embed([wrapped])).vectors[0], dtype=float)
    vectors = [np.asarray(v, dtype=float) for v in asyncio.run(embedder.embed(entries)).vectors]
    scores = [float(v @ query / np.linalg.norm(v) / np.linalg.norm(query) * 100) for v in vectors]
    expected = sorted(range(7), key=lambda i: -scores[i])[:5]
    assert [h["record"] for h in hits] == [str(i) for i in expected]
    assert [h["score"] for h in hits] == pytest.approx([scores[i] for i in expected])
    block = driver.messages()[1].content.split("<memory>\n", 1)[1].split("\n</memory>\n<trajectory_history>")[0]
    records = driver.session.bank.records
    assert block.split("\n") == [f"<memory>{records[i].render()}</memory>" for i in expected]
    assert records[0].render() == str({"task_id": "0", "memory_items": ITEMS.split("\n\n"), "status": "success"})


@pytest.mark.usefixtures("released_prompts")
def test_the_query_is_cut_to_4096_characters_and_an_empty_bank_shows_none():
    memory, embedder = _memory(["fail"]), BagOfWordsEmbedderFixture()
    driver = _driver(memory, embedder)
    driver.begin("q" * 5000)
    assert embedder.inputs == []  # nothing stored: nothing embedded, nothing retrieved
    assert "<memory>\nNone\n</memory>" in driver.messages()[1].content
    _end(driver, ["entry"])
    driver.session.clock.request = driver.request = 1
    asyncio.run(driver.session.begin_request(RequestStart(index=2, query="next", memory_query="y" * 5000)))
    assert len(embedder.inputs[-1][0]) == 4096 and embedder.inputs[-1][0].startswith("Instruct: ")


def test_titles_are_read_from_the_items():
    assert titles(["# Memory Item 1\n## Title A b\n## Content c", "no title"]) == ["A b"]


def test_a_missing_released_prompt_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("FLOWSTATE_DATA", str(tmp_path))
    with pytest.raises(MethodDataError, match="flowstate data fetch methods"):
        _driver(_memory([]), BagOfWordsEmbedderFixture())
