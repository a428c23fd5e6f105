"""Mem0 (the mem0ai package, pinned) with the episode's callers: entries added as MemoryArena's
wrapper adds them, search with the library's defaults, a store per episode in a scratch folder."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from flowstate import MethodCallers, RequestEnd, RequestOutcome, RequestStart, new_session
from flowstate.chat import SamplingOverride
from flowstate.methods.mem0 import ACKNOWLEDGEMENT, render_hits
from tests.flowstate.fixtures import TASK, BagOfWordsEmbedderFixture, ScriptedPolicyFixture


def _remember(messages) -> str:
    """TEST FIXTURE: Mem0's extraction reply keeping the new user message as one memory."""
    new = messages[-1].content.split("## New Messages\nuser: ", 1)[1].split("\nassistant: ", 1)[0]
    return json.dumps({"memory": [{"id": "0", "text": f"Fact: {new}", "attributed_to": "user"}]})


def _session(calls: int = 10):
    memory, embedder = ScriptedPolicyFixture([_remember] * calls), BagOfWordsEmbedderFixture()
    session = new_session("mem0", TASK, callers=MethodCallers(memory=memory, embeddings=embedder))
    return session, memory, embedder


async def _request(session, index: int, query: str, entries: list[str]) -> str:
    session.clock.request = index
    await session.begin_request(RequestStart(index=index, query=query, memory_query=query))
    user = (await session.messages(None))[1].content
    await session.end_request(RequestOutcome(index=index, query=query, ended=RequestEnd.RESPONSE, final_response="ok",
                                             steps=[], memory_entries=entries))
    return user.split("<memory>\n", 1)[1].split("\n</memory>", 1)[0]


def test_entries_are_added_as_the_wrapper_adds_them_and_found_again():
    async def scenario():
        session, memory, embedder = _session()
        assert session._scratch is None  # nothing on disk before the first entry
        first = await _request(session, 1, "Where does the user fly?", ["the user flies to Paris on May 5"])
        second = await _request(session, 2, "PARIS flight date", ["the user prefers window seats"])
        scratch = session._scratch
        assert (scratch / "history.db").is_file() and (scratch / "qdrant").is_dir()
        await session.aclose()
        return session, memory, embedder, scratch, first, second

    session, memory, embedder, scratch, first, second = asyncio.run(scenario())
    assert first == "None"  # nothing stored before the first request
    assert second.split("\n")[0] == "Fact: the user flies to Paris on May 5"
    (system, user), *_ = memory.calls
    assert system.role == "system" and "## New Messages\nuser: the user flies to Paris on May 5\n" \
        f"assistant: {ACKNOWLEDGEMENT}" in user.content
    assert memory.schemas[0] == {"type": "object"}  # Mem0 asks for a JSON object
    assert memory.samplings[0] == SamplingOverride(temperature=0.1, top_p=0.1, max_tokens=2000)
    assert ["paris flight date"] in embedder.inputs  # the query, lower-cased
    kinds = [(r.kind, r.request) for r in session.records]
    assert kinds == [("retrieval", 1), ("write", 1), ("retrieval", 2), ("write", 2)]
    write = session.records[1].payload
    assert write["events"] == [{"event": "ADD", "memory": "Fact: the user flies to Paris on May 5"}]
    retrieval = session.records[2].payload
    assert retrieval["stored"] == 1 and retrieval["hits"][0]["memory"].startswith("Fact: the user flies")
    assert not scratch.exists()  # the store and its history database went with the episode


def test_hits_render_one_line_each_with_categories_where_given():
    hits = [{"memory": "likes tea", "categories": ["food", "drink"]}, {"memory": ""}, {"memory": "lives in Oslo"}]
    assert render_hits(hits) == "likes tea (categories: food, drink)\nlives in Oslo"
    assert render_hits([]) == "None"


def test_a_failing_memory_model_is_raised_not_swallowed():
    class Down:
        async def complete(self, messages, *, json_schema=None):
            raise ConnectionError("memory endpoint down")

    async def scenario():
        session = new_session("mem0", TASK, callers=MethodCallers(memory=Down(), embeddings=BagOfWordsEmbedderFixture()))
        try:
            await session.begin_request(RequestStart(index=1, query="q", memory_query="q"))
            await session.end_request(RequestOutcome(index=1, query="q", ended=RequestEnd.RESPONSE, final_response="ok",
                                                     steps=[], memory_entries=["an entry"]))
        finally:
            await session.aclose()

    with pytest.raises(ConnectionError, match="memory endpoint down"):
        asyncio.run(scenario())


def test_eight_concurrent_episodes_in_one_loop_keep_their_own_stores():
    async def episode(i: int) -> tuple[str, Path]:
        session, _, _ = _session()
        await _request(session, 1, "q", [f"secret {i} is canary{i}"])
        found = await _request(session, 2, f"secret {i}", [])
        scratch = session._scratch
        await session.aclose()
        return found, scratch

    async def all_of_them():
        return await asyncio.gather(*(episode(i) for i in range(8)))

    results = asyncio.run(all_of_them())
    for i, (found, scratch) in enumerate(results):
        assert f"canary{i}" in found
        assert all(f"canary{j}" not in found for j in range(8) if j != i)
        assert not scratch.exists()


def test_a_memory_prompt_longer_than_the_window_ends_the_episode_with_its_reason():
    from flowstate import ContextOverflowError, LoopLimits, run_episode
    from tests.flowstate.fixtures import EnvironmentFixture, tagged

    class TooLong:
        async def complete(self, messages, *, json_schema=None):
            raise ContextOverflowError("memory: 8,600 tokens do not fit 8,192")

    session = new_session("mem0", TASK, callers=MethodCallers(memory=TooLong(), embeddings=BagOfWordsEmbedderFixture()))
    agent = ScriptedPolicyFixture([tagged(message="done")] * 3)
    result = asyncio.run(run_episode(session, agent, EnvironmentFixture(["first", "second"]), limits=LoopLimits()))
    assert result.termination == "memory_context_overflow"
    assert len(agent.calls) == 1  # the first request ran; storing its entry overflowed; nothing after
    assert not session._scratch.exists()  # closed however the episode ended
