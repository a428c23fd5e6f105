"""BM25 memory (MemoryArena's retrieval baseline, CONTRACT §2) in the B.3 "Memory System" prompt.

Each memory entry is cut into pieces of at most ``piece_tokens`` tokens of the ``tokenizer``
encoding (o200k_base, offline); pieces are tokenised for retrieval with ``[a-z0-9]+`` over the
lower-cased text and ranked by ``rank_bm25.BM25Okapi`` with its defaults over every piece stored
so far; the top ``top_k`` come back whatever their score, ties in insertion order; a query without
terms retrieves nothing. Retrieval runs once per request, with the benchmark's memory query; the
entries are stored when the request ends (the benchmark's initial memory before the first one).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt
from pydantic import Field
from rank_bm25 import BM25Okapi

from flowstate.methods.base import MethodCallers, MethodOptions
from flowstate.methods.memory_system import NOTHING_RETRIEVED, MemorySystemSession
from flowstate.methods.tokenizer import Encoding, encoding
from flowstate.prompts import TaskPrompt

_TERMS = re.compile(r"[a-z0-9]+")


def terms(text: str) -> list[str]:
    return _TERMS.findall(text.lower())


def pieces(text: str, tokenizer: Encoding, max_tokens: int) -> list[str]:
    """``text`` cut into consecutive pieces of at most ``max_tokens`` tokens (decoded back to text)."""
    enc = encoding(tokenizer)
    tokens = enc.encode_ordinary(text)
    return [enc.decode(tokens[i:i + max_tokens]) for i in range(0, len(tokens), max_tokens)] or [""]


class Ranking(Protocol):
    """What this module uses of a ``BM25Okapi`` index: one score per piece, in insertion order."""

    def get_scores(self, query: list[str]) -> npt.NDArray[np.float64]: ...


@dataclass(frozen=True)
class Hit:
    piece: int  # the piece's id: its position in insertion order
    score: float
    text: str


class BM25Memory:
    """Pieces in insertion order and the BM25 index over them (rebuilt after an add, when next queried)."""

    def __init__(self, tokenizer: Encoding = "o200k_base", piece_tokens: int = 2048) -> None:
        self.tokenizer = tokenizer
        self.piece_tokens = piece_tokens
        self.pieces: list[str] = []
        self._terms: list[list[str]] = []
        self._index: Ranking | None = None

    def add(self, text: str) -> list[int]:
        """Store one entry; the ids of its pieces."""
        new = pieces(text, self.tokenizer, self.piece_tokens)
        start = len(self.pieces)
        self.pieces += new
        self._terms += [terms(p) for p in new]
        self._index = None
        return list(range(start, start + len(new)))

    def retrieve(self, query: str, top_k: int) -> list[Hit]:
        words = terms(query)
        if not words or not any(self._terms):  # no query terms, or nothing to rank
            return []
        if self._index is None:
            self._index = BM25Okapi(self._terms)
        scores = self._index.get_scores(words)
        best = sorted(range(len(scores)), key=lambda i: -scores[i])[:top_k]  # stable: ties in insertion order
        return [Hit(piece=i, score=float(scores[i]), text=self.pieces[i]) for i in best]


def render_hits(hits: list[Hit]) -> str:
    """The retrieved pieces, best first, one blank line apart (``None`` when nothing came back)."""
    return "\n\n".join(h.text for h in hits) or NOTHING_RETRIEVED


class RetrievalOptions(MethodOptions):
    """BM25's settings, for every method that retrieves with it."""

    top_k: int = Field(default=3, ge=1)
    piece_tokens: int = Field(default=2048, ge=1)
    tokenizer: Encoding = "o200k_base"


class Recall:
    """BM25 memory as a session uses it: entries stored, retrieval with a query, both recorded
    (``write`` and ``retrieval`` records of the session's)."""

    def __init__(self, record: Callable[[str, Any], None], options: RetrievalOptions) -> None:
        self.record = record
        self.top_k = options.top_k
        self.memory = BM25Memory(options.tokenizer, options.piece_tokens)

    def store(self, entries: list[str]) -> None:
        if entries:
            ids = [piece for entry in entries for piece in self.memory.add(entry)]
            self.record("write", {"entries": len(entries), "pieces": ids})

    def retrieve(self, query: str) -> str:
        hits = self.memory.retrieve(query, self.top_k)
        self.record("retrieval", {"query": query, "stored_pieces": len(self.memory.pieces),
                                  "hits": [{"piece": h.piece, "score": h.score} for h in hits]})
        return render_hits(hits)


class BM25Options(RetrievalOptions):
    name: Literal["bm25"] = "bm25"


class BM25Session(MemorySystemSession[BM25Options]):
    """BM25 in the B.3 "Memory System" prompt."""

    record_kinds = ("retrieval", "write")

    def __init__(self, task: TaskPrompt, options: BM25Options, tool_names: list[str] | None = None,
                 callers: MethodCallers = MethodCallers()) -> None:
        super().__init__(task, options, tool_names, callers)
        self.recall = Recall(self.record, options)

    async def store(self, entries: list[str]) -> None:
        self.recall.store(entries)

    async def retrieve(self, query: str) -> str:
        return self.recall.retrieve(query)
