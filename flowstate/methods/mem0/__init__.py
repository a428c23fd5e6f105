"""Mem0: the ``mem0ai`` package's open-source ``Memory`` (pinned at 2.2.1), in the B.3 "Memory
System" prompt, as MemoryArena's wrapper uses it.

Its LLM is the job's memory role and its embedder the job's embeddings deployment, both through the
episode's recorded callers (:mod:`.bridge`); its vector store (Qdrant in local mode) and history
database live in a scratch directory of the episode, removed when the episode ends; telemetry off,
nothing fetched. Entries are added as the wrapper adds them (the entry as a user message,
acknowledged by a fixed assistant message); each request searches with its memory query, lower-
cased, with the library's defaults (top 20, threshold 0.1); each hit is one line of ``<memory>``,
``memory (categories: …)`` where the hit has categories (the open-source ``Memory`` gives none).

The paper ran Mem0 at revision 8d6c001, which is not published as a release; 2.2.1 is the pinned
release. Its extraction prompt carries the day's date (Mem0's own), so memory-model prompts differ
from one day to the next.
"""

from __future__ import annotations

import asyncio
import importlib
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from flowstate.chat import SamplingOverride, estimate_tokens, with_sampling
from flowstate.methods.base import Capability, EpisodeShape, MethodCallers, MethodOptions, OwnCalls
from flowstate.methods.memory_system import NOTHING_RETRIEVED, MemorySystemSession
from flowstate.prompts import TaskPrompt

# MemoryArena's wrapper acknowledges every added entry with this assistant message.
ACKNOWLEDGEMENT = "Thanks for the information! I will remember this."
USER_ID = "episode"  # one store per episode, so one user
# Mem0's add() shows its extraction call the last 10 messages of the store: 5 earlier entries with their
# acknowledgements.
EARLIER_ENTRIES_SHOWN = 5


class Mem0Options(MethodOptions):
    name: Literal["mem0"] = "mem0"
    top_k: int = Field(default=20, ge=1)  # Memory.search's defaults
    threshold: float = 0.1
    # Mem0's own LLM settings (BaseLlmConfig's defaults), for the memory model's calls.
    temperature: float = 0.1
    top_p: float = 0.1
    max_tokens: int = Field(default=2000, gt=0)


def render_hits(hits: list[dict[str, Any]]) -> str:
    lines = []
    for hit in hits:
        text = hit.get("memory")
        if text:
            categories = hit.get("categories") or []
            lines.append(f"{text} (categories: {', '.join(categories)})" if categories else text)
    return "\n".join(lines) or NOTHING_RETRIEVED


class Mem0Session(MemorySystemSession[Mem0Options]):
    uses = frozenset({Capability.MEMORY, Capability.MEMORY_MODEL, Capability.EMBEDDINGS})
    record_kinds = ("retrieval", "write")

    def __init__(self, task: TaskPrompt, options: Mem0Options, tool_names: list[str] | None = None,
                 callers: MethodCallers = MethodCallers()) -> None:
        super().__init__(task, options, tool_names, callers)
        self._memory: Any = None
        self._bridge: Any = None
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mem0")  # Mem0 is synchronous
        self._scratch: Path | None = None  # made with the store

    @classmethod
    def own_calls(cls, options: Mem0Options, task: TaskPrompt, shape: EpisodeShape) -> OwnCalls:
        """Mem0 2.2.1's ``add``: one extraction call (its prompt, the entry, earlier entries) and two
        embeddings (the entry, to find what the store holds; the extracted memories, in one batch);
        ``search``: one embedding per request; and one when the store is made, for the embeddings'
        dimension. No entries, no store: no calls."""
        from mem0.configs.prompts import ADDITIVE_EXTRACTION_PROMPT  # about a second: only when estimating

        entries, entry = shape.memory_entries, shape.entry_tokens
        if not entries:
            return OwnCalls()  # the store is made at the first entry: nothing stored, nothing called
        shown = sum(min(i, EARLIER_ENTRIES_SHOWN) for i in range(round(entries)))  # earlier entries in each call
        return OwnCalls(memory=entries,
                        memory_tokens=entries * (estimate_tokens(ADDITIVE_EXTRACTION_PROMPT) + entry) + shown * entry,
                        embeddings=1 + 2 * entries + shape.requests,
                        embedding_tokens=(2 * entries + shape.requests) * entry)

    async def _in_worker(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        self._bridge.loop = asyncio.get_running_loop()  # the callers' loop (a driver may run each call anew)
        try:
            result = await asyncio.get_running_loop().run_in_executor(self._worker, partial(fn, *args, **kwargs))
        except Exception:
            failure, self._bridge.failure = self._bridge.failure, None
            if failure is not None:  # our caller's own error, which Mem0 wrapped in its own
                raise failure from None
            raise
        failure, self._bridge.failure = self._bridge.failure, None
        if failure is not None:  # Mem0 swallowed it
            raise failure
        return result

    async def _store(self) -> Any:
        """The episode's Memory, made at first use: Qdrant needs the embeddings' dimension, which
        one embedding call tells."""
        if self._memory is None:
            assert self.callers.memory is not None and self.callers.embeddings is not None  # checked by new_session
            loop = asyncio.get_running_loop()
            # Importing Mem0 and Qdrant takes about a second: in the worker, not on the episodes' loop.
            bridge = await loop.run_in_executor(self._worker, importlib.import_module, "flowstate.methods.mem0.bridge")
            dims = len((await self.callers.embeddings.embed(["dimensions"])).vectors[0])
            o = self.options
            llm = with_sampling(self.callers.memory, SamplingOverride(temperature=o.temperature, top_p=o.top_p,
                                                                      max_tokens=o.max_tokens))
            self._bridge = bridge.Bridge(loop)
            self._scratch = Path(tempfile.mkdtemp(prefix="flowstate-mem0-"))
            self._memory = await loop.run_in_executor(self._worker, partial(
                bridge.new_memory, self._scratch, dims, bridge.BridgedLLM(llm, self._bridge),
                bridge.BridgedEmbedder(self.callers.embeddings, dims, self._bridge)))
        return self._memory

    async def store(self, entries: list[str]) -> None:
        for entry in entries:
            memory = await self._store()
            messages = [{"role": "user", "content": entry}, {"role": "assistant", "content": ACKNOWLEDGEMENT}]
            added = await self._in_worker(memory.add, messages, user_id=USER_ID)
            results = added.get("results", []) if isinstance(added, dict) else []
            self.record("write", {"entries": 1, "records": [r.get("id") for r in results],
                                  "events": [{"event": r.get("event"), "memory": r.get("memory")} for r in results]})

    async def retrieve(self, query: str) -> str:
        hits: list[dict[str, Any]] = []
        if self._memory is not None:  # nothing stored yet: nothing to find
            found = await self._in_worker(self._memory.search, query.lower(), top_k=self.options.top_k,
                                          threshold=self.options.threshold, filters={"user_id": USER_ID})
            hits = found.get("results", []) if isinstance(found, dict) else list(found or [])
        self.record("retrieval", {"query": query, "stored": await self._count(),
                                  "hits": [{"record": h.get("id"), "score": h.get("score"), "memory": h.get("memory")}
                                           for h in hits]})
        return render_hits(hits)

    async def _count(self) -> int:
        if self._memory is None:
            return 0
        listed = await self._in_worker(self._memory.get_all, filters={"user_id": USER_ID}, top_k=100_000)
        return len(listed.get("results", [])) if isinstance(listed, dict) else len(listed or [])

    async def aclose(self) -> None:
        try:
            if self._memory is not None:
                from flowstate.methods.mem0.bridge import close_memory

                await asyncio.get_running_loop().run_in_executor(self._worker, close_memory, self._memory)
                self._memory = None
        finally:
            self._worker.shutdown(wait=False)
            if self._scratch is not None:
                shutil.rmtree(self._scratch, ignore_errors=True)
