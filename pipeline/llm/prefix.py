"""An honest estimate of llama.cpp prefix-cache hits, since llama.cpp reports none.

What llama-cpp-python's server tells us: its responses carry ``usage.prompt_tokens`` and
``usage.completion_tokens`` only. Internally one ``Llama`` object per server keeps the token ids of
the last prompt *plus the completion it generated* and re-evaluates only the part of the next
prompt after their longest common prefix (its verbose stderr line ``Llama.generate: N prefix-match
hit``); requests are served one at a time, so the "cache" is exactly the previous call on that
server. That line cannot be matched to a response, so we estimate instead:

1. render the messages in a fixed, template-like text form (:func:`render_prompt`);
2. take the longest common prefix, in characters, with the previous prompt *and its completion*
   served on the same replica (:class:`PrefixMemory`);
3. scale it to tokens with this prompt's own ratio: ``prompt_tokens * shared_chars / len(text)``.

It is labelled ``cached_tokens_estimate`` and stays an estimate: the real chat template adds
different marker text than ours, and the "previous call" is the previous one *reported* to the
memory, which under concurrency may differ from the order the server served them in.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from flowstate.chat import ChatMessage

_END = "<|end|>\n"


def render_prompt(messages: Sequence[ChatMessage]) -> str:
    """Messages as one string ending in an open assistant turn, like a chat template does."""
    return "".join(f"<|{m.role}|>\n{m.content}{_END}" for m in messages) + "<|assistant|>\n"


def estimate_cached_tokens(prompt_tokens: int | None, shared_chars: int, prompt_chars: int) -> int | None:
    """Shared characters scaled to tokens by the prompt's own tokens-per-character ratio."""
    if prompt_tokens is None or prompt_chars == 0:
        return None
    return min(prompt_tokens, round(prompt_tokens * shared_chars / prompt_chars))


class PrefixMemory:
    """The last rendered prompt + completion per replica URL; ``observe`` returns the shared prefix."""

    def __init__(self) -> None:
        self._last: dict[str, str] = {}

    def observe(self, url: str, prompt_text: str, completion_text: str) -> int:
        previous = self._last.get(url, "")
        # The server evaluated the completion's tokens but not the end-of-turn token it sampled last.
        self._last[url] = prompt_text + completion_text
        return len(os.path.commonprefix([previous, prompt_text]))

    def forget(self, url: str) -> None:
        self._last.pop(url, None)
