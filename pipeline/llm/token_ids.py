"""The token ids an engine sees, for exact prefix-cache accounting (:class:`pipeline.llm.prefix.PromptLedger`).

A deployment kind says where its engine's ids come from (its spec's ``token_source()``): the served
model's own tokenizer in this process, or the server's ``/tokenize`` endpoint
(:class:`TokenizeEndpoint`); without a source the figures stay null.
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


class TokenizeEndpoint:
    """``POST /tokenize`` at the server's root (beside ``/v1``), on the replica that served the call:
    the chat messages under the server's own template, or a piece of text without special tokens
    (vLLM's API; the stand-in server answers it too)."""

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
