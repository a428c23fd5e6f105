"""The token ids an engine sees, for exact prefix-cache accounting (:class:`pipeline.llm.prefix.PromptLedger`).

llama.cpp: the GGUF's own vocabulary and chat template in this process (its server's tokenize
endpoint applies no chat template). vLLM: its ``/tokenize`` endpoint, on the replica that served
the call, with the chat messages (its own template) and, for a piece of text, without special
tokens. Other engines: none (the figures stay null).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

from flowstate import ChatMessage
from pipeline.llm.http import post_json

_TOKENIZE_TIMEOUT_S = 30.0


class TokenSource(Protocol):
    async def prompt_ids(self, url: str, messages: Sequence[ChatMessage]) -> list[int]: ...

    async def text_ids(self, url: str, text: str) -> list[int]: ...


class LocalTokens:
    """llama.cpp: the served GGUF's tokenizer, loaded once per process."""

    def __init__(self, gguf: str) -> None:
        self.gguf = gguf

    async def prompt_ids(self, url: str, messages: Sequence[ChatMessage]) -> list[int]:
        from pipeline.llm.tokenizer import chat_tokenizer

        return chat_tokenizer(self.gguf).prompt_ids(messages)

    async def text_ids(self, url: str, text: str) -> list[int]:
        from pipeline.llm.tokenizer import chat_tokenizer

        return chat_tokenizer(self.gguf).ids(text)


class VllmTokens:
    """vLLM: ``POST /tokenize`` at the server's root (beside ``/v1``)."""

    def __init__(self, model: str) -> None:
        self.model = model

    async def _tokens(self, url: str, body: dict[str, object]) -> list[int]:
        root = url[: -len("/v1")] if url.endswith("/v1") else url
        async with asyncio.timeout(_TOKENIZE_TIMEOUT_S):
            reply = await post_json(root, "/tokenize", {"model": self.model, **body}, api_key="EMPTY")
        tokens = reply.get("tokens") if isinstance(reply, dict) else None
        if not isinstance(tokens, list):
            raise ValueError(f"{root}/tokenize answered no token list")
        return [int(t) for t in tokens]

    async def prompt_ids(self, url: str, messages: Sequence[ChatMessage]) -> list[int]:
        return await self._tokens(url, {"messages": [{"role": m.role, "content": m.content} for m in messages],
                                        "add_generation_prompt": True})

    async def text_ids(self, url: str, text: str) -> list[int]:
        return await self._tokens(url, {"prompt": text, "add_special_tokens": False}) if text else []


def endpoint_tokens(engine: str, model: str) -> TokenSource | None:
    """An external server's token ids: vLLM answers ``/tokenize``; the others have no such endpoint
    here (an external llama.cpp server's GGUF is not at hand)."""
    return VllmTokens(model) if engine == "vllm" else None
