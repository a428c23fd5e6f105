"""The model side of the loop: chat messages in, text plus token usage out.

Everything that talks to a model (an HTTP endpoint, a shared GPU deployment, a scripted test
policy) implements :class:`Policy`, so the loop never knows where completions come from.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Literal["system", "user", "assistant"]
    content: str


TokenCounter = Callable[[str], int]


def estimate_tokens(text: str) -> int:
    """About four characters per token: a labelled estimate where no tokenizer is at hand."""
    return (len(text) + 3) // 4


class TokenUsage(BaseModel):
    """Token counts as the server reports them; ``None`` where it reports nothing."""

    model_config = ConfigDict(extra="forbid")

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # Prompt tokens served from the server's prefix cache (vLLM reports them; llama.cpp does not).
    cached_tokens: int | None = None
    # A labelled estimate where the engine reports no cache figure (see pipeline.llm).
    cached_tokens_estimate: int | None = None
    # True when no server counted these tokens and a tokenizer did (scripted fixtures).
    counted: bool = False
    # Exact, from the engine's token ids (pipeline.llm.prefix.PromptLedger): leading prompt tokens the
    # previous call of the conversation left on the same replica, and the most any layout could reuse.
    reusable_prefix_tokens: int | None = None
    physical_limit_tokens: int | None = None


class Completion(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str
    usage: TokenUsage = TokenUsage()
    latency_s: float = 0.0
    finish_reason: str | None = None
    model: str | None = None
    # Which replica / endpoint served the call (for latency and cache analysis).
    served_by: str | None = None


class ContextOverflowError(Exception):
    """The prompt does not fit the model's context window: ends the episode, not the sweep. Not a
    :class:`~flowstate.errors.FlowStateError`: the loop turns it into the episode's termination."""


@runtime_checkable
class Policy(Protocol):
    """An async chat model: ``messages -> Completion``.

    ``json_schema`` asks the server to constrain the output to that JSON schema (the JSON
    protocol mode); a policy that cannot enforce it must ignore it, not fail.
    """

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        json_schema: Mapping[str, Any] | None = None,
    ) -> Completion: ...


class SamplingOverride(BaseModel):
    """What one use of a model fixes for its calls, replacing the role's settings (a method that
    calls its memory model the way its own code does: a judge at temperature 0, ...)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None


def with_sampling(policy: Policy, override: SamplingOverride) -> Policy:
    """``policy`` calling with ``override`` where it samples (a server's client has ``with_sampling``);
    a policy that does not sample, such as a scripted fixture, is returned as it is."""
    resample = getattr(policy, "with_sampling", None)
    return resample(override) if callable(resample) else policy


class Embeddings(BaseModel):
    """Vectors for a batch of texts, in input order, with the tokens the server counted."""

    model_config = ConfigDict(extra="forbid")

    vectors: list[list[float]]
    prompt_tokens: int | None = None
    latency_s: float = 0.0
    model: str | None = None


@runtime_checkable
class Embedder(Protocol):
    """An async embedding model: ``texts -> Embeddings`` (OpenAI's ``/v1/embeddings`` shape)."""

    async def embed(self, texts: Sequence[str]) -> Embeddings: ...
