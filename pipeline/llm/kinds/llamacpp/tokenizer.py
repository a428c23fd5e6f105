"""A GGUF file's own tokenizer, offline: its vocabulary and chat template, as llama.cpp's server applies them.

Two uses: exact prefix accounting of llama.cpp replicas (:class:`LocalTokens`: llama-cpp-python's
tokenize endpoint applies no chat template), and counting the tokens of calls no server counts
(registered as the tokenizers ``smollm2``, the embedded default's model, and ``.gguf``, any GGUF
file: :mod:`pipeline.llm.counting`). The chat template is the one the GGUF carries, applied as
llama-cpp-python's server applies it (its Jinja formatter; the beginning-of-sequence token added
unless the template adds it), so a count here is what that server would report for the same messages.
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import sys
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from flowstate import ChatMessage
from pipeline.llm.counting import TokenizerError
from pipeline.llm.kinds.llamacpp.model import smollm2_gguf

if TYPE_CHECKING:  # llama-cpp-python is optional (the `cpu` extra): imported where a tokenizer is loaded
    from llama_cpp.llama_types import ChatCompletionRequestMessage

# llama.cpp's log levels (ggml.h). llama-cpp-python 0.3.x maps them by an older enum, under which a
# warning reads as an error and passes ``verbose=False``: a vocabulary-only model's context then
# printed "n_ctx_seq (512) > n_ctx_train (0) -- possible training context overflow" on every run.
GGML_LOG_LEVEL_ERROR = 4
GGML_LOG_LEVEL_CONT = 5  # the previous message goes on
log = logging.getLogger(__name__)


class LlamaLog:
    """llama.cpp's log in this process: its errors on stderr, as llama.cpp prints them; the rest
    (a context's settings, warnings that concern no vocabulary) on this module's debug log."""

    def __init__(self) -> None:
        self.error = False

    def __call__(self, level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        if level != GGML_LOG_LEVEL_CONT:
            self.error = level >= GGML_LOG_LEVEL_ERROR
        message = text.decode("utf-8", errors="replace")
        if self.error:
            print(message, end="", file=sys.stderr, flush=True)
        else:
            log.debug(message.rstrip("\n"))


@cache
def route_llama_log() -> object:
    """Install :class:`LlamaLog` as llama.cpp's log callback (once; the ctypes callback it returns
    must stay alive as long as llama.cpp may call it: the cache holds it)."""
    import llama_cpp

    callback = llama_cpp.llama_log_callback(LlamaLog())
    llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))
    return callback


class GgufTokenizer:
    def __init__(self, gguf: Path) -> None:
        try:
            import llama_cpp
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter
        except ImportError as exc:
            raise TokenizerError("counting tokens needs llama-cpp-python (the `cpu` extra: scripts/setup.sh)") from exc
        if not gguf.is_file():
            raise TokenizerError(f"no GGUF file at {gguf}")
        self.name = gguf.stem
        route_llama_log()
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
        formatted = self._format(messages=[_llama_message(m) for m in messages])
        return self._llama.tokenize(formatted.prompt.encode(), add_bos=not formatted.added_special, special=True)

    def ids(self, text: str) -> list[int]:
        """The token ids of a piece of text on its own (a completion, an added message)."""
        return self._llama.tokenize(text.encode(), add_bos=False, special=False) if text else []

    def count(self, text: str) -> int:
        return len(self.ids(text))


def _llama_message(message: ChatMessage) -> ChatCompletionRequestMessage:
    """A message in llama-cpp-python's typed form (one TypedDict per role)."""
    if message.role == "system":
        return {"role": "system", "content": message.content}
    if message.role == "user":
        return {"role": "user", "content": message.content}
    return {"role": "assistant", "content": message.content}


@cache
def gguf_tokenizer(gguf: str) -> GgufTokenizer:
    """The tokenizer of a GGUF file (``~`` expanded), loaded once per process."""
    return GgufTokenizer(Path(gguf).expanduser())


def smollm2_tokenizer(name: str) -> GgufTokenizer:
    """The embedded default's model's tokenizer (``name`` is ``smollm2``)."""
    return gguf_tokenizer(str(smollm2_gguf()))


class LocalTokens:
    """llama.cpp's token ids: the served GGUF's tokenizer, loaded once per process."""

    def __init__(self, gguf: str) -> None:
        self.gguf = gguf

    async def prompt_ids(self, url: str, messages: Sequence[ChatMessage]) -> list[int]:
        return gguf_tokenizer(self.gguf).prompt_ids(messages)

    async def text_ids(self, url: str, text: str) -> list[int]:
        return gguf_tokenizer(self.gguf).ids(text)
