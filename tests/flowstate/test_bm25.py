"""BM25 memory as CONTRACT §2 of memoryarena states it, the offline encoding it cuts pieces with, and
the B.3 "Memory System" prompt it fills."""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import socket

import pytest

from flowstate import RequestEnd, RequestOutcome, RequestStart, parse_output
from flowstate.methods.bm25 import NOTHING_RETRIEVED, BM25Memory, pieces, terms
from flowstate.methods.tokenizer import SHA256, TokenizerUnavailableError, encoding
from tests.flowstate.fixtures import Driver, tagged


def test_o200k_base_loads_without_the_network(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("no network in this test")

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(socket.socket, "connect", refuse)
    encoding.cache_clear()
    enc = encoding("o200k_base")
    assert enc.encode_ordinary("hello world") == [24912, 2375]  # OpenAI's ids for these two tokens
    assert enc.n_vocab == 200019
    [cached] = list(tmp_path.iterdir())  # the official rank file, where tiktoken looks for it
    assert hashlib.sha256(cached.read_bytes()).hexdigest() == SHA256["o200k_base"]
    encoding.cache_clear()


def test_a_cache_turned_off_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    encoding.cache_clear()
    with pytest.raises(TokenizerUnavailableError, match="TIKTOKEN_CACHE_DIR is empty"):
        encoding("o200k_base")
    encoding.cache_clear()


def test_entries_are_cut_into_pieces_of_at_most_the_token_limit():
    text = " ".join(f"word{i}" for i in range(3000))
    cut = pieces(text, "o200k_base", 2048)
    enc = encoding("o200k_base")
    assert len(cut) > 1 and "".join(cut) == text
    assert all(len(enc.encode_ordinary(p)) <= 2048 for p in cut)
    assert pieces("short", "o200k_base", 2048) == ["short"]


def test_retrieval_terms_are_lowercase_alphanumeric_runs():
    assert terms("Flight HAT-001, $99.50; naïve O'Brien") == ["flight", "hat", "001", "99", "50", "na", "ve", "o", "brien"]
    assert terms("!!! ---") == []


def _okapi(corpus: list[list[str]], query: list[str]) -> list[float]:
    """BM25Okapi as rank_bm25 defines it (k1 1.5, b 0.75, negative idf floored at 0.25 × mean idf)."""
    n, avgdl = len(corpus), sum(map(len, corpus)) / len(corpus)
    df = {w: sum(w in d for d in corpus) for w in {w for d in corpus for w in d}}
    idf = {w: math.log(n - f + 0.5) - math.log(f + 0.5) for w, f in df.items()}
    floor = 0.25 * sum(idf.values()) / len(idf)
    idf = {w: (v if v >= 0 else floor) for w, v in idf.items()}
    return [sum(idf.get(q, 0) * d.count(q) * 2.5 / (d.count(q) + 1.5 * (0.25 + 0.75 * len(d) / avgdl)) for q in query)
            for d in corpus]


def test_the_top_three_come_back_whatever_their_score_ties_in_insertion_order():
    memory = BM25Memory()
    for text in ["the red car is fast", "a blue boat", "red red wine", "a blue boat", "green tea", "black coffee",
                 "white rice", "yellow sun"]:
        memory.add(text)
    hits = memory.retrieve("blue boat", 3)
    assert [h.piece for h in hits] == [1, 3, 0]  # a tie in insertion order, then a piece that scores 0
    expected = _okapi([terms(p) for p in memory.pieces], ["blue", "boat"])
    assert [h.score for h in hits] == pytest.approx([expected[i] for i in (1, 3, 0)])
    assert hits[0].score > 0 and hits[2].score == 0.0
    hits = memory.retrieve("red wine", 3)
    assert [h.piece for h in hits] == [2, 0, 1]  # "red" twice beats "red" once


def test_nothing_is_retrieved_without_query_terms_or_memory():
    memory = BM25Memory()
    assert memory.retrieve("anything", 3) == []
    memory.add("!!!")  # a piece without terms: nothing to rank
    assert memory.retrieve("anything", 3) == []
    memory.add("some text")
    assert memory.retrieve("?!", 3) == []
    # a term in half the pieces has idf 0 (rank_bm25's formula): both score 0, in insertion order
    assert [(h.piece, h.score) for h in memory.retrieve("text", 3)] == [(0, 0.0), (1, 0.0)]


def test_the_session_shows_retrieved_pieces_and_only_this_requests_trajectory():
    driver = Driver({"name": "bm25", "top_k": 2})
    driver.session.clock.request = 1
    asyncio.run(driver.session.begin_request(RequestStart(index=1, query="book HAT001", memory_query="flight HAT001",
                                                          memory_entries=["initial: the user flies HAT001 on May 5",
                                                                          "the user likes window seats", "the user is vegan",
                                                                          "the user has two bags"])))
    driver.request = 1
    user = driver.messages()[1].content
    assert user.startswith("<memory>\ninitial: the user flies HAT001 on May 5\n\nthe user likes window seats\n</memory>\n"
                           "<trajectory_history>\nuser (request 1): book HAT001\n</trajectory_history>\n")
    driver.apply(parse_output(tagged(calls=[{"name": "search", "arguments": {}}])))
    driver.observe(1, "RAW", "raw")
    driver.apply(parse_output(tagged(message="Booked.")))
    outcome_entries = ["request 1: booked HAT001, seat 12A"]
    asyncio.run(driver.session.end_request(RequestOutcome(index=1, query="book HAT001", ended=RequestEnd.RESPONSE,
                                                          final_response="Booked.", steps=[],
                                                          memory_entries=outcome_entries)))
    driver.begin("which seat?")  # memory_query = the query: "which seat?"
    user = driver.messages()[1].content
    memory_block = user.split("<memory>\n")[1].split("\n</memory>")[0]
    assert memory_block.split("\n\n")[0] == "request 1: booked HAT001, seat 12A"
    assert "user (request 1)" not in user and "user (request 2): which seat?" in user
    records = [(r.kind, r.request, r.payload) for r in driver.session.records]
    assert records[0] == ("write", 1, {"entries": 4, "pieces": [0, 1, 2, 3]})
    assert records[1][0:2] == ("retrieval", 1) and records[1][2]["query"] == "flight HAT001"
    assert records[2] == ("write", 1, {"entries": 1, "pieces": [4]})
    assert records[3][2]["stored_pieces"] == 5 and records[3][2]["hits"][0]["piece"] == 4


def test_an_empty_memory_shows_none():
    driver = Driver("bm25")
    driver.begin("q")
    assert f"<memory>\n{NOTHING_RETRIEVED}\n</memory>" in driver.messages()[1].content
    assert json.loads(json.dumps(driver.session.options.identity())) == {
        "name": "bm25", "protocol": "tagged", "rejection_feedback": False, "top_k": 3, "piece_tokens": 2048,
        "tokenizer": "o200k_base"}
