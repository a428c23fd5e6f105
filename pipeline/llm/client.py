"""One OpenAI-compatible async client for every engine, implementing ``flowstate.chat.Policy``.

Retries live here and only here: transport errors, timeouts, 429 and 5xx, a 2xx that is not JSON
and a chat reply without any choice are retried with exponential backoff and jitter (a 429 at
least for its ``Retry-After``) up to ``RetryPolicy.max_attempts``, then
:class:`ModelUnavailableError`. A prompt longer than the context window raises
``ContextOverflowError`` at once; other 4xx raise :class:`ModelRequestError`. Every failed attempt,
and every completion cut at ``max_tokens``, is reported as a :class:`~pipeline.llm.faults.FaultReport`
(the episode's call log records them). Which server a call goes to is the job of an
:class:`Endpoints` (one fixed URL, or a router's sticky replica), so a routed client re-routes
between attempts when its replica dies.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import random
import re
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, NamedTuple, Protocol

from flowstate.chat import ChatMessage, Completion, ContextOverflowError, Embeddings, SamplingOverride, TokenUsage
from pipeline.llm.engines import OPENAI_API, EngineProfile
from pipeline.llm.errors import ModelError, ModelRequestError, ModelUnavailableError
from pipeline.llm.faults import MESSAGE_LIMIT, FaultKind, FaultReport, report_fault
from pipeline.llm.http import HttpConnectionError, HttpReplyError, HttpStatusError, post_json
from pipeline.llm.prefix import PrefixMemory, PromptLedger, estimate_cached_tokens, render_prompt
from pipeline.llm.settings import ClientSettings, RetryPolicy, SamplingParams
from pipeline.llm.token_ids import TokenSource

# How vLLM, llama.cpp (C++ server and llama-cpp-python) and OpenAI word a too-long prompt.
_OVERFLOW = re.compile(
    r"context[ _]length|maximum context|context window|exceed_context_size|context size"
    r"|maximum model length|max_model_len|prompt is too (long|big)|too many tokens",
    re.IGNORECASE,
)
_RETRY_STATUS = frozenset({408, 409, 429})
_SCHEMA_NAME = re.compile(r"[^A-Za-z0-9_-]")
_REDACTED = "***"


class Endpoints(Protocol):
    """Where a client's calls go, and what it tells that place about them."""

    async def acquire(self) -> str:
        """The base URL (ending in ``/v1``) for the next attempt."""
        ...

    async def report_failure(self, url: str) -> None:
        """A connection to ``url`` failed or timed out: let the owner check it and re-route."""
        ...

    async def shared_prefix(self, url: str, prompt_text: str, completion_text: str) -> int:
        """Characters this prompt shares with the previous one served by ``url`` (then remember it)."""
        ...

    async def release(self) -> None:
        """The conversation is over."""
        ...


# Prompts seen per URL by fixed-endpoint clients of this process (a router keeps its own).
_LOCAL_PREFIXES = PrefixMemory()


class FixedEndpoint:
    """A single server that nobody routes for (an external endpoint)."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")

    def __repr__(self) -> str:
        return f"FixedEndpoint({self.base_url!r})"

    async def acquire(self) -> str:
        return self.base_url

    async def report_failure(self, url: str) -> None:
        """Nothing to re-route to; the retry loop backs off and tries again."""

    async def shared_prefix(self, url: str, prompt_text: str, completion_text: str) -> int:
        return _LOCAL_PREFIXES.observe(url, prompt_text, completion_text)

    async def release(self) -> None:
        """No per-conversation state."""


# One in-flight semaphore per event loop and limit key (asyncio objects must not cross loops; Ray
# runs each concurrency group of an async actor on a loop of its own).
_IN_FLIGHT: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Semaphore]] = (
    weakref.WeakKeyDictionary()
)


def response_format(profile: EngineProfile, schema: Mapping[str, Any], *, strict: bool = True) -> dict[str, Any]:
    """``response_format`` in the form the engine enforces (an engine may ignore other forms silently)."""
    if profile.response_format == "json_object":
        return {"type": "json_object", "schema": dict(schema)}
    name = _SCHEMA_NAME.sub("_", str(schema.get("title", "response")))[:64] or "response"
    return {"type": "json_schema", "json_schema": {"name": name, "schema": dict(schema), "strict": strict}}


def is_context_overflow(exc: BaseException) -> bool:
    """A 4xx whose error text says the prompt does not fit the context window."""
    if not isinstance(exc, HttpStatusError) or not 400 <= exc.status_code < 500:
        return False
    return bool(_OVERFLOW.search(f"{exc.message} {json.dumps(exc.body, default=str)}"))


async def wait_before_retry(seconds: float) -> None:
    """The pause before a retry (its own function, so that a test can record the pauses)."""
    await asyncio.sleep(seconds)


def backoff_delay(attempt: int, retry: RetryPolicy, rng: random.Random | None = None) -> float:
    """Seconds to wait before attempt ``attempt + 1`` (``attempt`` counts from 0)."""
    base = min(retry.max_backoff_s, retry.initial_backoff_s * 2**attempt)
    return base * (1.0 - retry.jitter * (rng or random).random())


def _retry_after(exc: BaseException, retry: RetryPolicy) -> float:
    """The server's Retry-After (seconds form), capped at the policy's longest backoff."""
    value = exc.retry_after if isinstance(exc, HttpStatusError) and exc.retry_after is not None else 0.0
    return min(max(value, 0.0), retry.max_backoff_s)


Outcome = Literal["overflow", "reject", "retry", "reroute"]


def classify(exc: BaseException) -> Outcome | None:
    """What to do about an exception from one attempt; ``None``: not ours, let it propagate."""
    if isinstance(exc, (TimeoutError, HttpConnectionError)):
        return "reroute"
    if isinstance(exc, HttpStatusError):
        if exc.status_code >= 500 or exc.status_code in _RETRY_STATUS:
            return "retry"  # first: a 429 "too many tokens per minute" is no overflow
        return "overflow" if is_context_overflow(exc) else "reject"
    if isinstance(exc, HttpReplyError):
        return "retry"  # a garbled 200: a proxy or a crashing server, worth another try
    return None


class NoChoicesError(HttpReplyError):
    """A 2xx chat reply without any choice: the server's failure, not the model's answer."""


def fault_kind(exc: BaseException) -> FaultKind:
    """The :mod:`~pipeline.llm.faults` kind of an exception that :func:`classify` sorts."""
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, HttpConnectionError):
        return "connection"
    if isinstance(exc, NoChoicesError):
        return "no_choices"
    if isinstance(exc, HttpReplyError):
        return "invalid_json"
    assert isinstance(exc, HttpStatusError)
    if exc.status_code >= 500:
        return "server_error"
    if exc.status_code == 429:
        return "rate_limited"
    return "context_overflow" if is_context_overflow(exc) else "http_error"


class Reply(NamedTuple):
    """A usable answer of :meth:`OpenAIClient._call`."""

    body: Any
    url: str
    latency_s: float
    attempt: int  # from 1


def _scrub(exc: BaseException, secret: str | None) -> BaseException:
    """Remove the API key from an exception's text in place (servers sometimes echo it)."""
    if secret and secret in str(exc):
        text = str(exc).replace(secret, _REDACTED)
        exc.args = (text,)
        if isinstance(exc, HttpStatusError):  # the one sorted kind that keeps its text apart
            exc.message = text
    return exc


class OpenAIClient:
    """What every call to an OpenAI-compatible server shares: routing, the in-flight limit, timeouts,
    retries with backoff, and a key read from the environment.

    The API key is read from the environment variable ``api_key_env`` at each call; it is never
    stored on this object, logged, or left in exception texts.
    """

    def __init__(
        self,
        endpoints: Endpoints | str,
        model: str,
        *,
        settings: ClientSettings = ClientSettings(),
        api_key_env: str | None = None,
        limit_key: str | None = None,
        conversation: str | None = None,
    ) -> None:
        self.endpoints = FixedEndpoint(endpoints) if isinstance(endpoints, str) else endpoints
        self.model = model
        self.settings = settings
        self.api_key_env = api_key_env
        # Calls sharing a limit_key share one in-flight semaphore (one per deployment).
        self.limit_key = limit_key or repr(self.endpoints)
        # Sent as OpenAI's standard ``user`` field: lets a server (or the stub) tell conversations apart.
        self.conversation = conversation

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, endpoints={self.endpoints!r})"

    async def aclose(self) -> None:
        """End the conversation (a router frees its sticky replica)."""
        await self.endpoints.release()

    async def _call(self, path: str, body: dict[str, Any],
                    check: Callable[[Any], None] = lambda reply: None) -> Reply:
        """POST ``body`` to ``path`` with retries; ``check`` raises an ``HttpReplyError`` for a 2xx
        reply that is no answer (retried like a garbled one). Each failed attempt is reported."""
        retry = self.settings.retry
        last: BaseException | None = None
        for attempt in range(1, retry.max_attempts + 1):
            url = await self.endpoints.acquire()
            started = time.perf_counter()
            try:
                async with self._semaphore():
                    started = time.perf_counter()
                    async with asyncio.timeout(self.settings.timeout_s):
                        response = await post_json(url, path, body, api_key=self._api_key())
                    check(response)
                    return Reply(response, url, time.perf_counter() - started, attempt)
            except Exception as exc:  # noqa: BLE001 - sorted by classify(), the rest re-raised
                outcome = classify(exc)
                if outcome is None:
                    raise
                last = _scrub(exc, self._secret())
                retried = outcome in ("retry", "reroute") and attempt < retry.max_attempts
                report_fault(FaultReport(
                    kind=fault_kind(exc), http_status=exc.status_code if isinstance(exc, HttpStatusError) else None,
                    attempt=attempt, latency_s=time.perf_counter() - started, served_by=url, retried=retried,
                    message=(str(exc) or type(exc).__name__)[:MESSAGE_LIMIT]))
                self._raise_unless_retryable(exc, outcome)
                if outcome == "reroute":
                    await self.endpoints.report_failure(url)
                if retried:
                    await wait_before_retry(max(backoff_delay(attempt - 1, retry), _retry_after(exc, retry)))
        raise ModelUnavailableError(
            f"{self.model}: no usable reply after {retry.max_attempts} attempts; last error: "
            f"{type(last).__name__}: {last}",
            last,
        ) from last

    # -- internals -----------------------------------------------------------------------
    def _raise_unless_retryable(self, exc: Exception, outcome: Outcome) -> None:
        """Raise at once what must not be retried (``exc`` is already scrubbed)."""
        if outcome == "overflow":
            raise ContextOverflowError(f"{self.model}: {exc}") from exc
        if outcome == "reject":
            raise ModelRequestError(f"{self.model}: request rejected: {exc}", exc) from exc

    def _secret(self) -> str | None:
        return os.environ.get(self.api_key_env) if self.api_key_env else None

    def _semaphore(self) -> asyncio.Semaphore:
        semaphores = _IN_FLIGHT.setdefault(asyncio.get_running_loop(), {})
        if self.limit_key not in semaphores:
            semaphores[self.limit_key] = asyncio.Semaphore(self.settings.max_in_flight)
        return semaphores[self.limit_key]

    def _api_key(self) -> str:
        key = self._secret()
        if self.api_key_env and not key:
            raise ModelError(f"environment variable {self.api_key_env} (API key) is not set")
        return key or "EMPTY"


class ChatClient(OpenAIClient):
    """``Policy`` over an OpenAI-compatible server (vLLM, llama.cpp, OpenAI, the stub server)."""

    def __init__(
        self,
        endpoints: Endpoints | str,
        model: str,
        *,
        profile: EngineProfile = OPENAI_API,
        sampling: SamplingParams = SamplingParams(),
        settings: ClientSettings = ClientSettings(),
        api_key_env: str | None = None,
        limit_key: str | None = None,
        conversation: str | None = None,
        tokens: TokenSource | None = None,
    ) -> None:
        super().__init__(endpoints, model, settings=settings, api_key_env=api_key_env, limit_key=limit_key,
                         conversation=conversation)
        self.profile = profile
        self.sampling = sampling
        # Exact prefix accounting where the engine's token ids can be had.
        self.tokens = tokens
        self._ledger = PromptLedger()

    def __repr__(self) -> str:
        return f"ChatClient(model={self.model!r}, engine={self.profile.name!r}, endpoints={self.endpoints!r})"

    def with_sampling(self, override: SamplingOverride) -> ChatClient:
        """The same conversation (routing, limits) sampling with ``override``'s settings where set."""
        clone = copy.copy(self)
        clone.sampling = self.sampling.model_copy(update=override.model_dump(exclude_none=True))
        return clone

    async def complete(
        self, messages: Sequence[ChatMessage], *, json_schema: Mapping[str, Any] | None = None
    ) -> Completion:
        reply = await self._call("/chat/completions", self._request(messages, json_schema), check=_has_choices)
        completion = await self._completion(reply.body, reply.url, reply.latency_s, messages)
        if completion.finish_reason == "length":
            report_fault(FaultReport(
                kind="length", http_status=200, attempt=reply.attempt, latency_s=reply.latency_s, served_by=reply.url,
                retried=False, message=f"completion cut at max_tokens={self.sampling.max_tokens} "
                                       f"({completion.usage.completion_tokens} completion tokens)"))
        return completion

    def _request(self, messages: Sequence[ChatMessage], json_schema: Mapping[str, Any] | None) -> dict[str, Any]:
        """The JSON body of one chat-completion request, sent as it is (no client-side transform)."""
        s = self.sampling
        sampling = {"temperature": s.temperature, "top_p": s.top_p, "max_tokens": s.max_tokens, "seed": s.seed}
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            **({"user": self.conversation} if self.conversation else {}),
            **{k: v for k, v in sampling.items() if v is not None},
            **s.extra_body,
        }
        if json_schema is not None:
            body["response_format"] = response_format(self.profile, json_schema, strict=self.settings.strict_json_schema)
        return body

    async def _completion(
        self, response: Any, url: str, latency: float, messages: Sequence[ChatMessage]
    ) -> Completion:
        """A choice without content is an empty text, for the caller to score as a failure."""
        choice = response["choices"][0]
        message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
        text = message.get("content") or ""
        usage = _usage(response.get("usage"))
        if self.profile.estimates_cached_prefix:
            prompt_text = render_prompt(messages)
            shared = await self.endpoints.shared_prefix(url, prompt_text, text)
            usage.cached_tokens_estimate = estimate_cached_tokens(usage.prompt_tokens, shared, len(prompt_text))
        if self.tokens is not None:
            usage.reusable_prefix_tokens, usage.physical_limit_tokens = await self._account(url, messages, text)
        return Completion(
            text=text if isinstance(text, str) else json.dumps(text),
            usage=usage,
            latency_s=latency,
            finish_reason=choice.get("finish_reason"),
            model=response.get("model"),
            served_by=url,
        )

    async def _account(self, url: str, messages: Sequence[ChatMessage], text: str) -> tuple[int | None, int | None]:
        """This call's reusable prefix and physical limit (None, None when the ids cannot be had)."""
        assert self.tokens is not None
        try:
            prompt_ids = await self.tokens.prompt_ids(url, messages)
            completion_ids = await self.tokens.text_ids(url, text)
            added = 0
            for piece in self._ledger.added(messages):
                added += len(await self.tokens.text_ids(url, piece))
        except (HttpStatusError, HttpConnectionError, TimeoutError, ValueError, OSError):
            return None, None
        return self._ledger.account(url, prompt_ids, completion_ids, messages, text, added)


class EmbeddingClient(OpenAIClient):
    """``flowstate.chat.Embedder`` over an OpenAI-compatible ``/v1/embeddings`` (vLLM in pooling
    mode, llama.cpp's server with ``--embedding``, OpenAI, the stub server)."""

    async def embed(self, texts: Sequence[str]) -> Embeddings:
        if not texts:
            return Embeddings(vectors=[])
        body = {"model": self.model, "input": list(texts), **({"user": self.conversation} if self.conversation else {})}
        response, url, latency, _ = await self._call("/embeddings", body)
        data = response.get("data") if isinstance(response, dict) else None
        items = sorted((d for d in data or [] if isinstance(d, dict)), key=lambda d: d.get("index", 0))
        vectors = [d.get("embedding") for d in items]
        if len(vectors) != len(texts) or not all(isinstance(v, list) for v in vectors):
            raise ModelRequestError(f"{self.model}: {url}/embeddings answered {len(vectors)} vectors for "
                                    f"{len(texts)} texts", None)
        usage = response.get("usage") if isinstance(response.get("usage"), dict) else {}
        return Embeddings(vectors=vectors, prompt_tokens=usage.get("prompt_tokens"), latency_s=latency,
                          model=response.get("model"))


def _has_choices(reply: Any) -> None:
    choices = reply.get("choices") if isinstance(reply, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise NoChoicesError(f"a reply without any choice: {json.dumps(reply)[:200]}")


def _usage(usage: Any) -> TokenUsage:
    if not isinstance(usage, dict):
        return TokenUsage()
    details = usage.get("prompt_tokens_details")
    return TokenUsage(
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        cached_tokens=details.get("cached_tokens") if isinstance(details, dict) else None,
    )


