"""ChatClient against a real HTTP stub server: replies, usage, retries, failures, request shape."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowstate.chat import ChatMessage, ContextOverflowError, Policy
from pipeline.llm import (
    ENGINE_PROFILES,
    ChatClient,
    ClientSettings,
    ModelError,
    ModelRequestError,
    ModelUnavailableError,
    RetryPolicy,
    SamplingParams,
)
from pipeline.llm.client import backoff_delay
from pipeline.llm.http import HttpConnectionError, HttpStatusError
from pipeline.llm.kinds.replica_sim.server import StubServer

HELLO = [ChatMessage(role="system", content="be brief"), ChatMessage(role="user", content="hello there model")]
FAST_RETRY = RetryPolicy(max_attempts=3, initial_backoff_s=0.01, max_backoff_s=0.05)


def client(stub: StubServer, *, timeout_s: float = 5.0, retry: RetryPolicy = FAST_RETRY, engine: str = "openai",
           **kwargs: Any) -> ChatClient:
    """A client of ``engine``, by the profile its deployment kind registered."""
    return ChatClient(stub.url, "test-model", settings=ClientSettings(timeout_s=timeout_s, retry=retry),
                      profile=ENGINE_PROFILES.get(engine), **kwargs)


def test_is_a_policy_and_returns_text_usage_and_server(stub: StubServer) -> None:
    stub.cached_tokens = 2
    c = client(stub)
    assert isinstance(c, Policy)
    completion = asyncio.run(c.complete(HELLO))
    assert completion.text == "echo: hello there model"
    assert completion.usage.prompt_tokens == 5 and completion.usage.completion_tokens == 4
    assert completion.usage.cached_tokens == 2
    assert completion.usage.cached_tokens_estimate is None
    assert completion.served_by == stub.url and completion.finish_reason == "stop"
    assert completion.latency_s > 0
    assert stub.requests[-1]["messages"] == [m.model_dump() for m in HELLO]


def test_cached_tokens_absent_are_none(stub: StubServer) -> None:
    assert asyncio.run(client(stub).complete(HELLO)).usage.cached_tokens is None


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The pauses the client takes before its retries, recorded instead of slept."""
    from pipeline.llm import client as client_module

    taken: list[float] = []

    async def record(seconds: float) -> None:
        taken.append(seconds)

    monkeypatch.setattr(client_module, "wait_before_retry", record)
    return taken


def test_retries_5xx_with_backoff_then_succeeds(stub: StubServer, waits: list[float]) -> None:
    stub.inject("status", status=503, times=2)
    retry = RetryPolicy(max_attempts=3, initial_backoff_s=0.1, max_backoff_s=1.0, jitter=0.0)
    completion = asyncio.run(client(stub, retry=retry).complete(HELLO))
    assert completion.text.startswith("echo:")
    assert len(stub.requests) == 3
    assert waits == [0.1, 0.2]  # two backoffs, doubling


def test_429_waits_for_retry_after(stub: StubServer, waits: list[float]) -> None:
    stub.inject("status", status=429, times=1, retry_after=0.4, message="rate limited")
    asyncio.run(client(stub, retry=RetryPolicy(initial_backoff_s=0.01, max_backoff_s=1.0)).complete(HELLO))
    assert waits == [0.4]  # the server's Retry-After, not the shorter backoff
    assert len(stub.requests) == 2


def test_5xx_forever_raises_model_unavailable_with_cause(stub: StubServer) -> None:
    stub.inject("status", status=500)
    with pytest.raises(ModelUnavailableError) as info:
        asyncio.run(client(stub).complete(HELLO))
    assert isinstance(info.value.cause, HttpStatusError) and info.value.cause.status_code == 500
    assert info.value.__cause__ is info.value.cause
    assert len(stub.requests) == FAST_RETRY.max_attempts


def test_garbage_body_is_retried(stub: StubServer) -> None:
    stub.inject("garbage", times=1)
    assert asyncio.run(client(stub).complete(HELLO)).text.startswith("echo:")
    stub.inject("garbage")
    with pytest.raises(ModelUnavailableError):
        asyncio.run(client(stub).complete(HELLO))


def test_hanging_server_times_out(stub: StubServer) -> None:
    stub.inject("hang")
    with pytest.raises(ModelUnavailableError) as info:
        retry = RetryPolicy(max_attempts=2, initial_backoff_s=0.01)
        asyncio.run(client(stub, timeout_s=0.3, retry=retry).complete(HELLO))
    assert isinstance(info.value.cause, TimeoutError)  # each attempt cut at its timeout, then given up
    assert len(stub.requests) == 2


def test_unreachable_server_is_unavailable() -> None:
    with StubServer() as stub:
        url = stub.url
    c = ChatClient(url, "m", settings=ClientSettings(retry=FAST_RETRY))
    with pytest.raises(ModelUnavailableError) as info:
        asyncio.run(c.complete(HELLO))
    assert isinstance(info.value.cause, HttpConnectionError)


OVERFLOW_MESSAGES = {
    "vllm": "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens "
            "(8000 in the messages, 1000 in the completion).",
    "vllm-new": "'max_tokens' or 'max_completion_tokens' is too large: 1000. This model's maximum context "
                "length is 8192 tokens and your request has 7900 input tokens",
    "vllm-decoder": "The decoder prompt (length 9000) is longer than the maximum model length of 8192.",
    "llama.cpp": "the request exceeds the available context size, try increasing it",
    "openai": "Your input exceeds the context window of this model. Please adjust your input and try again.",
}


@pytest.mark.parametrize("message", OVERFLOW_MESSAGES.values(), ids=OVERFLOW_MESSAGES.keys())
def test_context_overflow_raises_at_once(stub: StubServer, message: str) -> None:
    stub.inject("status", status=400, message=message)
    with pytest.raises(ContextOverflowError):
        asyncio.run(client(stub).complete(HELLO))
    assert len(stub.requests) == 1


def test_rate_limit_about_tokens_is_retried_not_an_overflow(stub: StubServer) -> None:
    stub.inject("status", status=429, times=1, message="Too many tokens per minute; context window busy")
    assert asyncio.run(client(stub).complete(HELLO)).text.startswith("echo:")


def test_other_4xx_is_rejected_without_retry(stub: StubServer) -> None:
    stub.inject("status", status=404, message="The model `nope` does not exist.")
    with pytest.raises(ModelRequestError) as info:
        asyncio.run(client(stub).complete(HELLO))
    assert isinstance(info.value.cause, HttpStatusError) and info.value.cause.status_code == 404
    assert "The model `nope` does not exist." in str(info.value)
    assert len(stub.requests) == 1


def test_reply_without_choices_is_retried_and_one_without_content_is_empty_text(stub: StubServer) -> None:
    stub.inject("no_choices", times=1)
    assert asyncio.run(client(stub).complete(HELLO)).text.startswith("echo:")
    assert len(stub.requests) == 2

    async def null_content(messages: list[dict[str, Any]], body: dict[str, Any]) -> None:
        return None

    stub.responder = null_content
    completion = asyncio.run(client(stub).complete(HELLO))
    assert completion.text == "" and completion.finish_reason == "stop"


SCHEMA = {"title": "step output", "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


@pytest.mark.parametrize("engine", ["vllm", "openai"])
def test_json_schema_sent_as_json_schema_response_format(stub: StubServer, engine: str) -> None:
    asyncio.run(client(stub, engine=engine).complete(HELLO, json_schema=SCHEMA))
    assert stub.requests[-1]["response_format"] == {
        "type": "json_schema", "json_schema": {"name": "step_output", "schema": SCHEMA, "strict": True}}


def test_json_schema_sent_as_json_object_with_schema_for_llamacpp(stub: StubServer) -> None:
    asyncio.run(client(stub, engine="llamacpp").complete(HELLO, json_schema=SCHEMA))
    assert stub.requests[-1]["response_format"] == {"type": "json_object", "schema": SCHEMA}


def test_no_response_format_without_schema(stub: StubServer) -> None:
    asyncio.run(client(stub).complete(HELLO))
    assert "response_format" not in stub.requests[-1]


def test_sampling_parameters_and_engine_extras_are_sent(stub: StubServer) -> None:
    sampling = SamplingParams(temperature=0.7, top_p=0.9, max_tokens=33, seed=7,
                              extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    asyncio.run(client(stub, sampling=sampling).complete(HELLO))
    body = stub.requests[-1]
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["seed"]) == (0.7, 0.9, 33, 7)
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["model"] == "test-model"


def test_unset_sampling_parameters_are_not_sent(stub: StubServer) -> None:
    asyncio.run(client(stub, sampling=SamplingParams(temperature=None, max_tokens=None)).complete(HELLO))
    assert not {"temperature", "top_p", "max_tokens", "seed"} & set(stub.requests[-1])


SECRET = "sk-test-7f3a9c0d1e2b"


def test_api_key_is_sent_but_never_shown(stub: StubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOWSTATE_TEST_KEY", SECRET)
    c = client(stub, api_key_env="FLOWSTATE_TEST_KEY")
    asyncio.run(c.complete(HELLO))
    assert stub.authorizations[-1] == f"Bearer {SECRET}"
    assert SECRET not in repr(c) and SECRET not in str(vars(c))
    # Servers echo keys in error texts ("Incorrect API key provided: sk-..."): scrubbed everywhere.
    for status, error in [(401, ModelRequestError), (500, ModelUnavailableError)]:
        stub.inject("status", status=status, message=f"Incorrect API key provided: {SECRET}")
        with pytest.raises(error) as info:
            asyncio.run(c.complete(HELLO))
        texts = [str(info.value), repr(info.value), str(info.value.cause), repr(info.value.cause)]
        assert all(SECRET not in text for text in texts)
        assert "***" in str(info.value)


def test_missing_api_key_variable_is_named(stub: StubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLOWSTATE_ABSENT_KEY", raising=False)
    with pytest.raises(ModelError, match="FLOWSTATE_ABSENT_KEY"):
        asyncio.run(client(stub, api_key_env="FLOWSTATE_ABSENT_KEY").complete(HELLO))


def test_in_flight_requests_are_bounded_per_deployment(stub: StubServer) -> None:
    active = peak = 0

    async def slow(messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.05)
        active -= 1
        return "ok"

    stub.responder = slow
    settings = ClientSettings(max_in_flight=3)
    # Two clients of one deployment (same limit key) share the bound.
    a, b = (ChatClient(stub.url, "m", settings=settings, limit_key="deployment-1") for _ in range(2))

    async def main() -> None:
        await asyncio.gather(*(c.complete(HELLO) for c in [a, b] * 6))

    asyncio.run(main())
    assert peak == 3


def test_llamacpp_engine_estimates_cached_tokens_from_the_shared_prefix(stub: StubServer) -> None:
    c = client(stub, engine="llamacpp")
    first = asyncio.run(c.complete(HELLO))
    follow_up = [*HELLO, ChatMessage(role="assistant", content=first.text), ChatMessage(role="user", content="more")]
    second = asyncio.run(c.complete(follow_up))
    assert first.usage.cached_tokens is None and second.usage.cached_tokens is None
    assert first.usage.cached_tokens_estimate == 0
    # Everything but the last user turn was in the previous prompt + completion.
    assert second.usage.prompt_tokens is not None
    assert 0.6 * second.usage.prompt_tokens <= second.usage.cached_tokens_estimate < second.usage.prompt_tokens


@given(attempt=st.integers(0, 20), initial=st.floats(0, 5), cap=st.floats(0, 30), jitter=st.floats(0, 1),
       seed=st.integers(0, 2**32))
def test_backoff_grows_exponentially_within_jitter_and_cap(
    attempt: int, initial: float, cap: float, jitter: float, seed: int
) -> None:
    retry = RetryPolicy(initial_backoff_s=initial, max_backoff_s=cap, jitter=jitter)
    base = min(cap, initial * 2**attempt)
    delay = backoff_delay(attempt, retry, random.Random(seed))
    assert base * (1 - jitter) - 1e-9 <= delay <= base + 1e-9


def test_vllm_token_ids_from_tokenize_give_the_reusable_prefix_and_the_physical_limit(stub: StubServer) -> None:
    """The vLLM path: ``/tokenize`` at the server's root (the stub answers it in its word-token model)."""
    from pipeline.llm.token_ids import TokenizeEndpoint

    c = client(stub, engine="vllm", tokens=TokenizeEndpoint("test-model"))
    first = asyncio.run(c.complete(HELLO))
    assert (first.usage.reusable_prefix_tokens, first.usage.physical_limit_tokens) == (0, 0)
    follow = HELLO + [ChatMessage(role="assistant", content=first.text), ChatMessage(role="user", content="and more")]
    second = asyncio.run(c.complete(follow))
    u = second.usage
    assert u.prompt_tokens is not None and u.reusable_prefix_tokens is not None and u.physical_limit_tokens is not None
    # append-only: the previous prompt and its completion are the reusable prefix
    assert u.reusable_prefix_tokens == (first.usage.prompt_tokens or 0) + (first.usage.completion_tokens or 0)
    assert 0 < u.physical_limit_tokens <= u.prompt_tokens
    asyncio.run(c.aclose())
    # an engine without a tokenize endpoint records nothing
    plain = asyncio.run(client(stub).complete(HELLO)).usage
    assert (plain.reusable_prefix_tokens, plain.physical_limit_tokens) == (None, None)


def test_reply_cut_off_mid_body_is_a_connection_error_and_retried() -> None:
    """A server that promises 200 bytes, sends a few and hangs up: retried, then unavailable."""
    import socket
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    served = []

    def serve() -> None:
        for _ in range(FAST_RETRY.max_attempts):
            conn, _ = listener.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"cho")
                served.append(1)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    c = ChatClient(f"http://127.0.0.1:{port}/v1", "m", settings=ClientSettings(retry=FAST_RETRY))
    with pytest.raises(ModelUnavailableError) as info:
        asyncio.run(c.complete(HELLO))
    thread.join(5)
    listener.close()
    assert isinstance(info.value.cause, HttpConnectionError)
    assert len(served) == FAST_RETRY.max_attempts


def test_connection_pools_close_with_their_event_loop(stub: StubServer) -> None:
    """One keep-alive pool per loop and server; when ``asyncio.run`` ends, its pool is closed and
    forgotten (nothing "unclosed" is left for the garbage collector to complain about)."""
    from pipeline.llm import http

    seen: list[Any] = []

    async def call() -> None:
        await client(stub).complete(HELLO)
        await client(stub).complete(HELLO)  # the same pool
        seen.append(dict(http._POOLS._by_loop[asyncio.get_running_loop()]))

    asyncio.run(call())
    (session, _), = seen[0].values()
    assert session.closed
    assert not any(sessions for sessions in http._POOLS._by_loop.values())
