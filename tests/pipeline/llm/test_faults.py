"""Faults on the model path, one HTTP call at a time: what the stand-in server does for each kind,
that its rates are reproducible, and what the client reports, retries and raises."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter

import httpx
import pytest
from pydantic import ValidationError

from flowstate import StepClock
from flowstate.chat import ChatMessage, ContextOverflowError
from pipeline.llm import (
    ChatClient,
    ClientSettings,
    EmbeddingClient,
    ModelRequestError,
    ModelUnavailableError,
    RetryPolicy,
    SamplingParams,
)
from pipeline.llm.faults import FaultReport, reporting_faults
from pipeline.llm.kinds.replica_sim.server import Fault, FaultRate, FaultRates, StubServer
from pipeline.run.calls import CallLog

HELLO = [ChatMessage(role="user", content="hello there model")]
RETRY = RetryPolicy(max_attempts=3, initial_backoff_s=0.01, max_backoff_s=1.0, jitter=0.0)


def call(stub: StubServer, *, timeout_s: float = 5.0, max_tokens: int | None = 1024, conversation: str | None = None,
         retry: RetryPolicy = RETRY) -> tuple[str | Exception, list[FaultReport]]:
    """One chat call through the real client: (its text or what it raised, the faults it reported)."""
    reports: list[FaultReport] = []
    client = ChatClient(stub.url, "m", settings=ClientSettings(timeout_s=timeout_s, retry=retry),
                        sampling=SamplingParams(max_tokens=max_tokens), conversation=conversation)

    async def run() -> str | Exception:
        with reporting_faults(reports.append):
            try:
                return (await client.complete(HELLO)).text
            except (ModelUnavailableError, ModelRequestError, ContextOverflowError) as exc:
                return exc

    return asyncio.run(run()), reports


# (server fault, the client's kind, its HTTP status)
RETRIED = [
    (Fault(kind="status", status=500), "server_error", 500),
    (Fault(kind="status", status=503, message="overloaded"), "server_error", 503),
    (Fault(kind="status", status=429, retry_after=0.05), "rate_limited", 429),
    (Fault(kind="status", status=408), "http_error", 408),
    (Fault(kind="garbage"), "invalid_json", None),
    (Fault(kind="truncated"), "invalid_json", None),
    (Fault(kind="drop"), "connection", None),
    (Fault(kind="no_choices"), "no_choices", None),
]


@pytest.mark.parametrize(("fault", "kind", "status"), RETRIED, ids=[f"{f.kind}-{k}-{s}" for f, k, s in RETRIED])
def test_each_fault_once_is_one_report_and_the_retry_answers(stub: StubServer, fault: Fault, kind: str,
                                                              status: int | None) -> None:
    stub.inject(**fault.model_dump(exclude={"times"}), times=1)
    text, reports = call(stub)
    assert text == "echo: hello there model"
    (report,) = reports
    assert (report.kind, report.http_status, report.attempt, report.retried) == (kind, status, 1, True)
    assert report.served_by == stub.url and 0 <= report.latency_s < 5 and report.message
    assert [r.fault for r in stub.received] == [fault.model_copy(update={"times": 1}), None]


def test_a_hang_is_a_timeout_and_a_fault_every_time_raises_after_the_last_attempt(stub: StubServer) -> None:
    stub.inject("hang", times=1)
    text, (report,) = call(stub, timeout_s=0.3)
    assert text.startswith("echo:") and (report.kind, report.retried) == ("timeout", True)
    assert 0.3 <= report.latency_s < 2
    stub.inject("status", status=503)
    error, reports = call(stub)
    assert isinstance(error, ModelUnavailableError) and "503" in str(error)
    assert [(r.attempt, r.retried) for r in reports] == [(1, True), (2, True), (3, False)]


def test_what_is_never_retried_is_reported_once_as_not_retried(stub: StubServer) -> None:
    stub.inject("status", status=400, message="This model's maximum context length is 8192 tokens.")
    error, [report] = call(stub)
    assert isinstance(error, ContextOverflowError) and (report.kind, report.retried) == ("context_overflow", False)
    stub.inject("status", status=404, message="no such model")
    error, [report] = call(stub)
    assert isinstance(error, ModelRequestError)
    assert (report.kind, report.http_status, report.retried) == ("http_error", 404, False)


def test_a_completion_cut_at_max_tokens_is_the_answer_and_one_length_report(stub: StubServer) -> None:
    stub.inject("length", times=1)
    text, [report] = call(stub, max_tokens=10)
    assert text.split() == ("echo: hello there model " * 3).split()[:10]  # a model that ran on, cut at 10
    assert (report.kind, report.http_status, report.attempt, report.retried) == ("length", 200, 1, False)
    assert "max_tokens=10" in report.message and "10 completion tokens" in report.message
    assert len(stub.requests) == 1  # not retried
    reply = httpx.post(f"{stub.url}/chat/completions", json={"messages": [{"role": "user", "content": "a b c"}],
                                                               "max_tokens": 2})
    assert reply.json()["choices"][0]["finish_reason"] == "stop"  # an injected fault lasts its times


def test_retry_after_is_waited_for(stub: StubServer) -> None:
    stub.inject("status", status=429, retry_after=0.5, times=1)
    text, [report] = call(stub)
    assert text.startswith("echo:") and report.kind == "rate_limited"
    first, second = stub.received
    assert second.at - first.at >= 0.5  # the backoff alone would be 0.01 s


def test_no_sink_no_report_and_the_call_still_retries(stub: StubServer) -> None:
    stub.inject("status", status=503, times=1)
    client = ChatClient(stub.url, "m", settings=ClientSettings(retry=RETRY))
    assert asyncio.run(client.complete(HELLO)).text.startswith("echo:")


FIVE_KINDS = FaultRates(seed=3, rates=[
    FaultRate(fault=Fault(kind="status", status=503), rate=0.1),
    FaultRate(fault=Fault(kind="status", status=429, retry_after=0.01), rate=0.1),
    FaultRate(fault=Fault(kind="drop"), rate=0.1),
    FaultRate(fault=Fault(kind="truncated"), rate=0.1),
    FaultRate(fault=Fault(kind="no_choices"), rate=0.1),
])


def test_rates_are_honoured_and_draws_depend_on_seed_conversation_and_number_only() -> None:
    draws = [FIVE_KINDS.draw(f"episode-{e}/agent", n) for e in range(40) for n in range(50)]
    counts = Counter(f.kind if f is None or f.kind != "status" else f.status for f in draws if f is not None)
    assert set(counts) == {503, 429, "drop", "truncated", "no_choices"}
    assert all(150 <= n <= 250 for n in counts.values())  # 10 % of 2,000 each
    assert sum(counts.values()) / len(draws) == pytest.approx(0.5, abs=0.04)
    again = [FIVE_KINDS.draw(f"episode-{e}/agent", n) for e in range(40) for n in range(50)]
    assert again == draws
    other_seed = FIVE_KINDS.model_copy(update={"seed": 4})
    assert [other_seed.draw(f"episode-{e}/agent", n) for e in range(40) for n in range(50)] != draws
    with pytest.raises(ValidationError, match="more than every call"):
        FaultRates(rates=[FaultRate(fault=Fault(kind="hang"), rate=0.6)] * 2)


def test_a_server_at_rates_fails_each_conversation_the_same_way_however_calls_interleave() -> None:
    def faults_seen(order: list[str]) -> dict[str, list[str | None]]:
        with StubServer(faults=FIVE_KINDS) as stub, httpx.Client(base_url=stub.url) as http:
            for conversation in order:
                with contextlib.suppress(httpx.RemoteProtocolError):  # a dropped connection
                    http.post("/chat/completions", json={"user": conversation, "messages": []})
            seen: dict[str, list[str | None]] = {}
            for r in stub.received:
                seen.setdefault(r.conversation, []).append(r.fault.kind if r.fault else None)
            return seen

    interleaved = faults_seen(["a", "b"] * 15)
    assert interleaved == faults_seen(["a"] * 15 + ["b"] * 15)
    assert interleaved["a"] != interleaved["b"] and any(interleaved["a"]) and None in interleaved["a"]


def test_a_client_through_a_server_at_rates_gets_every_answer_and_reports_every_fault() -> None:
    with StubServer(faults=FIVE_KINDS) as stub:
        results = [call(stub, conversation="c", retry=RETRY.model_copy(update={"max_attempts": 8})) for _ in range(12)]
        injected = [r.fault for r in stub.received if r.fault is not None]
    reports = [r for _, reported in results for r in reported]
    assert all(text == "echo: hello there model" for text, _ in results)
    assert len(reports) == len(injected) >= 3
    server_kinds = {"status": None, "drop": "connection", "truncated": "invalid_json", "no_choices": "no_choices"}
    assert Counter(server_kinds[f.kind] or ("server_error" if f.status == 503 else "rate_limited") for f in injected) \
        == Counter(r.kind for r in reports)


def test_the_call_log_records_each_fault_with_its_role_request_step_and_deployment(stub: StubServer) -> None:
    log = CallLog({"agent": "big", "judge": "small", "embeddings": "vectors"}, attempt=2)
    log.clock = StepClock(request=2, step=3)
    settings = ClientSettings(retry=RETRY)
    stub.inject("status", status=503, times=1)
    asyncio.run(log.chat(ChatClient(stub.url, "m", settings=settings), "agent", in_step=True).complete(HELLO))
    stub.inject("drop", times=1)
    asyncio.run(log.chat(ChatClient(stub.url, "m", settings=settings), "judge", in_step=False).complete(HELLO))
    stub.inject("status", status=500, times=1)
    asyncio.run(log.embedder(EmbeddingClient(stub.url, "e", settings=settings)).embed(["a b"]))
    assert [(f.caller, f.request, f.step, f.deployment, f.episode_attempt, f.kind, f.attempt) for f in log.faults] == [
        ("agent", 2, 3, "big", 2, "server_error", 1), ("judge", None, None, "small", 2, "connection", 1),
        ("embeddings", 2, 3, "vectors", 2, "server_error", 1)]
    assert [c.caller for c in log.calls] == ["agent", "judge", "embeddings"]  # every call answered in the end
