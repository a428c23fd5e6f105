"""Tokens counted offline, for calls that no server counts (``analysis.count_tokens``).

A scripted test fixture's calls report no usage (its engine profile says so); a job that names a
tokenizer gets them counted by it, labelled ``TokenUsage.counted``, so that model-free sweeps still
show their context cost. Tokenizers are plug-ins: a deployment kind registers the ones it brings
(by name, or by the suffix of the files it reads), with the cost model of calls so counted where
it measured one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Protocol

from flowstate import ChatMessage, Completion, Policy, TokenUsage
from flowstate.errors import FlowStateError
from flowstate.registry import Registry
from pipeline.core.cost import CostModel
from pipeline.llm.closing import aclose_caller


class TokenizerError(FlowStateError, ValueError):
    """The tokenizer named cannot be loaded here (no such file, or its package is not installed)."""


class ChatTokenizer(Protocol):
    """A model's tokenizer and chat template, as its server applies them."""

    def prompt_ids(self, messages: Sequence[ChatMessage]) -> list[int]:
        """The token ids of the chat-templated prompt, ending in an open assistant turn."""
        ...

    def ids(self, text: str) -> list[int]:
        """The token ids of a piece of text on its own (a completion, an added message)."""
        ...

    def count(self, text: str) -> int:
        ...


@dataclass(frozen=True)
class TokenizerSource:
    """A registered tokenizer: how to load it from the name a job gives, and what a call counted with
    it costs where that was measured (the report's GPU-time estimate)."""

    load: Callable[[str], ChatTokenizer]
    cost_model: CostModel | None = None


#: By name (``smollm2``) or by the suffix of the files the tokenizer reads (``.gguf``).
TOKENIZERS: Registry[TokenizerSource] = Registry("tokenizer")


def tokenizer_source(name: str) -> TokenizerSource:
    """The registered tokenizer ``name`` is, or else the one that reads files like it."""
    return TOKENIZERS.get(name if name in TOKENIZERS.names() else Path(name).suffix)


@cache
def chat_tokenizer(name: str) -> ChatTokenizer:
    """A registered tokenizer's name or a tokenizer file's path, loaded once per process."""
    return tokenizer_source(name).load(name)


class CountingPolicy:
    """A policy whose calls no server counts, with the prompt and completion tokens counted by a
    tokenizer (``TokenUsage.counted``); calls that report usage pass unchanged."""

    def __init__(self, inner: Policy, tokenizer: ChatTokenizer) -> None:
        self.inner = inner
        self.tokenizer = tokenizer

    async def complete(self, messages: Sequence[ChatMessage], *,
                       json_schema: Mapping[str, Any] | None = None) -> Completion:
        completion = await self.inner.complete(messages, json_schema=json_schema)
        if completion.usage.prompt_tokens is not None:
            return completion
        usage = TokenUsage(prompt_tokens=len(self.tokenizer.prompt_ids(messages)),
                           completion_tokens=self.tokenizer.count(completion.text), counted=True)
        return completion.model_copy(update={"usage": usage})

    async def aclose(self) -> None:
        await aclose_caller(self.inner)
