"""The stand-in server itself: routes, fault injection, and holding 256 requests at once."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from pipeline.llm.kinds.replica_sim.server import RawConnection, StubServer

BODY = {"model": "m", "messages": [{"role": "user", "content": "one two three"}]}


def test_models_and_chat_routes(stub: StubServer) -> None:
    assert httpx.get(f"{stub.url}/models").json()["data"][0]["id"] == "stub-model"
    reply = httpx.post(f"{stub.url}/chat/completions", json=BODY).json()
    assert reply["choices"][0]["message"]["content"] == "echo: one two three"
    assert reply["usage"]["prompt_tokens"] == 3 and "prompt_tokens_details" not in reply["usage"]
    assert httpx.get(f"{stub.url}/nothing").status_code == 404


def test_faults_last_as_many_calls_as_asked(stub: StubServer) -> None:
    stub.inject("status", status=503, times=2, retry_after=1.5)
    statuses = [httpx.post(f"{stub.url}/chat/completions", json=BODY) for _ in range(3)]
    assert [r.status_code for r in statuses] == [503, 503, 200]
    assert statuses[0].headers["retry-after"] == "1.5"
    stub.inject("garbage")
    assert all(httpx.post(f"{stub.url}/chat/completions", json=BODY).status_code == 200 for _ in range(3))
    stub.clear()
    assert httpx.post(f"{stub.url}/chat/completions", json=BODY).json()["choices"]


async def burst(url: str, n: int = 256) -> None:
    """``n`` requests at once over ``n`` keep-alive connections, each answered."""
    connections = [await RawConnection.open(url) for _ in range(n)]
    replies = await asyncio.gather(*(c.post("/v1/chat/completions", BODY) for c in connections))
    assert all(status == 200 and json.loads(body)["choices"] for status, body in replies)
    await asyncio.gather(*(c.close() for c in connections))


def test_holds_256_requests_in_flight_at_once() -> None:
    everyone_in = asyncio.Event()
    active = 0

    async def barrier(messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
        nonlocal active
        active += 1
        if active == 256:
            everyone_in.set()
        await asyncio.wait_for(everyone_in.wait(), timeout=10)  # no reply until all 256 are inside
        return "ok"

    with StubServer(barrier) as stub:
        asyncio.run(burst(stub.url))
