"""ReasoningBank, as MemoryArena's port runs it, in the B.3 "Memory System" prompt.

Writing: each memory entry is first judged by the memory model (``success`` or ``fail``, a short
question of ours at temperature 0, at most 128 tokens; success when the reply contains
``success``), then one extraction call with the released prompt for that outcome (temperature 0.7)
returns the memory items, the reply split on blank lines. Entry, outcome and items form one
record, embedded from the entry's first 4,096 characters.

Reading: at the start of a request ``Instruct: <instruction>\\nQuery: <memory query>``, cut to
4,096 characters, is embedded; the top 5 records by cosine similarity (x 100, ties in insertion
order) fill ``<memory>``, each record whole (as the port prints it) in its own ``<memory>`` element.

The extraction prompts are Google's released SWE-bench variants (Apache-2.0), read from
``$FLOWSTATE_DATA/methods/reasoningbank/`` and checked against their SHA-256. The port's differ
only in their opening role sentence; its records also carry a date and a random id, which here
are left out and replaced by the record's number, so that prompts are reproducible.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field

from flowstate.chat import ChatMessage, Embedder, Policy, SamplingOverride, estimate_tokens, with_sampling
from flowstate.methods.base import Capability, EpisodeShape, MethodCallers, MethodOptions, OwnCalls
from flowstate.methods.memory_system import NOTHING_RETRIEVED, MemorySystemSession
from flowstate.methods.reasoningbank_release import RELEASE
from flowstate.prompts import TaskPrompt

# The released prompt of each judged outcome (reasoningbank_release.py pins them).
PROMPTS: dict[str, str] = {"success": "swebench_successful_si.txt", "fail": "swebench_failed_si.txt"}
# The retrieval instruction of MemoryArena's port (the instruction-aware query format of the paper).
PORT_INSTRUCTION = ("Given the prior task queries, your task is to analyze a current query's intent and "
                    "select relevant prior queries that could help complete it.")
JUDGE_SYSTEM = "You decide whether an agent accomplished the task it was given."
JUDGE_QUESTION = "\n\nWas the task accomplished? Reply with one word: success or fail."
EXTRACTION_HEADER = "**Query and Trajectory:**\n"
_TITLE = re.compile(r"^#+\s*Title\s*:?\s*(.+)$", re.MULTILINE)


class ReasoningBankOptions(MethodOptions):
    name: Literal["reasoningbank"] = "reasoningbank"
    top_k: int = Field(default=5, ge=1)
    embed_chars: int = Field(default=4096, ge=1)  # of an entry, and of the instruction-wrapped query
    instruction: str = PORT_INSTRUCTION
    judge_max_tokens: int = Field(default=128, gt=0)
    extract_temperature: float = Field(default=0.7, ge=0)
    extract_max_tokens: int = Field(default=4096, gt=0)


@dataclass(frozen=True)
class BankRecord:
    task_id: str
    memory_items: list[str]
    status: Literal["success", "fail"]

    def render(self) -> str:
        """The record as the port shows it to the agent (a Python dict's ``str``)."""
        return str({"task_id": self.task_id, "memory_items": self.memory_items, "status": self.status})


def titles(items: list[str]) -> list[str]:
    """The ``## Title`` lines of memory items (what the method-records table lists)."""
    return [m.group(1).strip() for item in items for m in _TITLE.finditer(item)]


def unit(vector: list[float]) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float64)
    norm = np.linalg.norm(array)
    return array / norm if norm > 0 else array


class ReasoningBank:
    """Records in insertion order with the unit embedding of each."""

    def __init__(self, memory: Policy, embeddings: Embedder, options: ReasoningBankOptions,
                 data_dir: Path | None = None) -> None:
        self.options = options
        self.embeddings = embeddings
        self.judge = with_sampling(memory, SamplingOverride(temperature=0.0, max_tokens=options.judge_max_tokens))
        self.extractor = with_sampling(memory, SamplingOverride(temperature=options.extract_temperature,
                                                                max_tokens=options.extract_max_tokens))
        self.prompts = {status: RELEASE.read(name, data_dir, what="ReasoningBank").strip()
                        for status, name in PROMPTS.items()}
        self.records: list[BankRecord] = []
        self._vectors: list[np.ndarray] = []

    async def add(self, entry: str) -> tuple[BankRecord, str]:
        """Judge, extract, embed: the new record and the judge's reply."""
        verdict = await self.judge.complete([ChatMessage(role="system", content=JUDGE_SYSTEM),
                                             ChatMessage(role="user", content=entry + JUDGE_QUESTION)])
        status: Literal["success", "fail"] = "success" if "success" in verdict.text.strip().lower() else "fail"
        extracted = await self.extractor.complete([ChatMessage(role="system", content=self.prompts[status]),
                                                   ChatMessage(role="user", content=EXTRACTION_HEADER + entry)])
        record = BankRecord(task_id=str(len(self.records)), memory_items=extracted.text.strip().split("\n\n"),
                            status=status)
        vector = (await self.embeddings.embed([entry[:self.options.embed_chars]])).vectors[0]
        self.records.append(record)
        self._vectors.append(unit(vector))
        return record, verdict.text

    async def retrieve(self, query: str) -> list[tuple[int, float]]:
        """(record index, cosine x 100) of the best ``top_k`` records, best first."""
        if not self.records:
            return []
        wrapped = f"Instruct: {self.options.instruction}\nQuery: {query}"[:self.options.embed_chars]
        vector = unit((await self.embeddings.embed([wrapped])).vectors[0])
        scores = np.stack(self._vectors) @ vector * 100.0
        best = sorted(range(len(scores)), key=lambda i: -scores[i])[:self.options.top_k]  # stable on ties
        return [(i, float(scores[i])) for i in best]


class ReasoningBankSession(MemorySystemSession[ReasoningBankOptions]):
    uses = frozenset({Capability.MEMORY, Capability.MEMORY_MODEL, Capability.EMBEDDINGS})
    record_kinds = ("retrieval", "write")

    def __init__(self, task: TaskPrompt, options: ReasoningBankOptions, tool_names: list[str] | None = None,
                 callers: MethodCallers = MethodCallers()) -> None:
        super().__init__(task, options, tool_names, callers)
        assert callers.memory is not None and callers.embeddings is not None  # checked by new_session
        self.bank = ReasoningBank(callers.memory, callers.embeddings, options)

    @classmethod
    def own_calls(cls, options: ReasoningBankOptions, task: TaskPrompt, shape: EpisodeShape) -> OwnCalls:
        """Per entry a judge call and an extraction call (each with the entry) and one embedding;
        per request, once something is stored, one embedding of its query."""
        extraction = max(estimate_tokens(RELEASE.read(name, what="ReasoningBank")) for name in PROMPTS.values())
        judge = estimate_tokens(JUDGE_SYSTEM + JUDGE_QUESTION)
        entries, entry = shape.memory_entries, min(shape.entry_tokens, options.embed_chars / 4)
        embeddings = entries + (shape.requests if entries else 0)  # an empty bank is not searched
        return OwnCalls(memory=2 * entries, memory_tokens=entries * (judge + extraction + 2 * shape.entry_tokens),
                        embeddings=embeddings, embedding_tokens=embeddings * entry)

    async def store(self, entries: list[str]) -> None:
        for entry in entries:
            record, verdict = await self.bank.add(entry)
            self.record("write", {"records": [record.task_id], "status": record.status, "judge_reply": verdict,
                                  "items": len(record.memory_items), "titles": titles(record.memory_items)})

    async def retrieve(self, query: str) -> str:
        hits = await self.bank.retrieve(query)
        self.record("retrieval", {"query": query, "stored": len(self.bank.records),
                                  "hits": [{"record": self.bank.records[i].task_id, "score": score} for i, score in hits]})
        return "\n".join(f"<memory>{self.bank.records[i].render()}</memory>" for i, _ in hits) or NOTHING_RETRIEVED
