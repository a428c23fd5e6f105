"""Mem0's LLM and embedder, delegating to the episode's recorded callers.

Mem0's ``Memory`` is synchronous: it runs in a worker thread of its own per episode, and each of
its model calls is a coroutine scheduled back on the actor's event loop (where the callers, their
HTTP clients and the call log live), the worker blocking until it finishes. A failure of our
caller is kept and re-raised by the session: Mem0 would wrap it in its own error and lose whether
it was an endpoint down (an infrastructure failure) or a bad reply.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
import os
import tempfile
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

# Before Mem0 is imported (it reads these once, at import): telemetry off, or it would post events
# and open a store shared by every Memory of the process; its home (importing it writes a config
# file there) in a scratch folder.
os.environ["MEM0_TELEMETRY"] = "False"
os.environ.setdefault("MEM0_DIR", str(Path(tempfile.gettempdir()) / "flowstate-mem0-home"))

from mem0 import Memory  # noqa: E402
from mem0.configs.base import MemoryConfig  # noqa: E402
from mem0.configs.embeddings.base import BaseEmbedderConfig  # noqa: E402
from mem0.embeddings.base import EmbeddingBase  # noqa: E402
from mem0.llms.base import LLMBase  # noqa: E402
from mem0.memory import telemetry  # noqa: E402

from flowstate.chat import ChatMessage, Embedder, Policy  # noqa: E402

MEM0_VERSION = "2.2.1"
if importlib.metadata.version("mem0ai") != MEM0_VERSION:
    raise ImportError(f"mem0ai {importlib.metadata.version('mem0ai')} is installed; the method is pinned to {MEM0_VERSION}")
if telemetry.MEM0_TELEMETRY:
    raise ImportError("mem0 was imported with telemetry on before this module: import flowstate.methods.mem0.bridge first")
logging.getLogger("mem0").setLevel(logging.ERROR)  # optional extras (spaCy, fastembed) missing: warned per store

T = TypeVar("T")
# What Mem0's ``response_format={"type": "json_object"}`` asks for, as a schema our callers send.
ANY_JSON_OBJECT = {"type": "object"}


class Bridge:
    """Runs coroutines on the episode's loop from Mem0's thread; remembers the first failure."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.failure: BaseException | None = None

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            return asyncio.run_coroutine_threadsafe(coro, self.loop).result()
        except BaseException as exc:
            self.failure = self.failure or exc
            raise


class BridgedLLM(LLMBase):  # type: ignore[misc]  # untyped (Any) to mypy: mem0ai ships no type information
    """Mem0's LLM: the job's memory role."""

    def __init__(self, policy: Policy, bridge: Bridge) -> None:
        super().__init__(None)
        self.policy, self.bridge = policy, bridge

    def generate_response(self, messages: list[dict[str, str]], response_format: Any = None, tools: Any = None,
                          tool_choice: str = "auto", **kwargs: Any) -> str:
        chat = [ChatMessage(role=m["role"], content=m["content"]) for m in messages]
        schema = ANY_JSON_OBJECT if isinstance(response_format, dict) and response_format.get("type") == "json_object" else None
        return self.bridge.run(self.policy.complete(chat, json_schema=schema)).text


class BridgedEmbedder(EmbeddingBase):  # type: ignore[misc]  # untyped (Any) to mypy: mem0ai ships no type information
    """Mem0's embedder: the job's embeddings deployment."""

    def __init__(self, embedder: Embedder, dims: int, bridge: Bridge) -> None:
        super().__init__(BaseEmbedderConfig(embedding_dims=dims))
        self.embedder, self.bridge = embedder, bridge

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        return self.embed_batch([text], memory_action or "search")[0]

    def embed_batch(self, texts: list[str], memory_action: str | None = "add") -> list[list[float]]:
        return self.bridge.run(self.embedder.embed(list(texts))).vectors


def new_memory(scratch: Path, dims: int, llm: BridgedLLM, embedder: BridgedEmbedder) -> Memory:
    """A Memory over Qdrant in local mode and a history database, both in ``scratch``, calling our LLM
    and embedder (Mem0 builds its providers at construction: placeholders, replaced at once)."""
    config = MemoryConfig(
        vector_store={"provider": "qdrant", "config": {"path": str(scratch / "qdrant"), "collection_name": "mem0",
                                                       "embedding_model_dims": dims, "on_disk": True}},
        llm={"provider": "openai", "config": {"api_key": "unused"}},
        embedder={"provider": "openai", "config": {"api_key": "unused", "embedding_dims": dims}},
        history_db_path=str(scratch / "history.db"),
    )
    memory = Memory(config)
    memory.llm, memory.embedding_model = llm, embedder
    return memory


def close_memory(memory: Memory) -> None:
    memory.close()  # the history database
    memory.vector_store.client.close()  # Qdrant's lock on its folder
