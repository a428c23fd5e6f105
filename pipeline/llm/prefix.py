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


# -- exact accounting from token ids ------------------------------------------------------------------
def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading token ids two sequences share."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def _diff_text(messages: Sequence[ChatMessage]) -> str:
    """Messages as lines for diffing: a header line per message (never counted), then its content."""
    return "".join(f"{_HEADER}{m.role}\n{m.content}" + ("" if m.content.endswith("\n") else "\n") for m in messages)


_HEADER = "\x00"  # not a line break to str.splitlines (\x1c to \x1e are)


def added_pieces(previous: str, current: str) -> list[str]:
    """The content ``current`` adds to ``previous`` (both :func:`_diff_text`): its lines that a line
    diff finds inserted or changed, each run of them one piece, message headers left out (lines, not
    tokens, keep the diff cheap)."""
    import difflib

    old, new = previous.splitlines(keepends=True), current.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    pieces = ["".join(line for line in new[j1:j2] if not line.startswith(_HEADER))
              for tag, _, _, j1, j2 in matcher.get_opcodes() if tag in ("insert", "replace")]
    return [p for p in pieces if p]


class PromptLedger:
    """One conversation's previous call, for two exact figures of the next one:

    - the **reusable prefix**: leading prompt tokens identical to the previous call's prompt and
      completion when the same replica serves it (what a prefix cache holding that sequence can
      skip; 0 on another replica or at the first call);
    - the **physical limit**: prompt tokens minus the tokens of the content added since the previous
      call (each added piece tokenised alone; the chat template's own markers are not content), the
      most any layout of the same content could reuse.
    """

    def __init__(self) -> None:
        self._url: str | None = None
        self._ids: list[int] = []
        self._text = ""

    def added(self, messages: Sequence[ChatMessage]) -> list[str]:
        """The pieces of content new since the previous call's messages and reply (all, at the first)."""
        return added_pieces(self._text if self._url is not None else "", _diff_text(messages))

    def account(self, url: str, prompt_ids: list[int], completion_ids: list[int], messages: Sequence[ChatMessage],
                completion: str, added_tokens: int | None) -> tuple[int, int]:
        """This call's (reusable prefix, physical limit), remembering it for the next call."""
        first = self._url is None
        reusable = 0 if first or url != self._url else common_prefix(self._ids, prompt_ids)
        physical = 0 if first or added_tokens is None else max(0, len(prompt_ids) - added_tokens)
        self._url, self._ids = url, prompt_ids + completion_ids
        self._text = _diff_text([*messages, ChatMessage(role="assistant", content=completion)])
        return reusable, physical
