"""The HTTP under every model call: keep-alive pools per event loop and server, one JSON POST.

aiohttp (a C HTTP parser) rather than the ``openai`` library over httpx: the same request bytes
for a fraction of the client's CPU per call (``perf/call_cpu.py``). Every failure comes out
as one of three kinds the client's retry loop sorts: :class:`HttpStatusError` (the server answered
non-2xx; its ``Retry-After`` kept), :class:`HttpConnectionError` (no connection, or it dropped
mid-reply) and :class:`HttpReplyError` (a 2xx whose body is not JSON). Timeouts are the caller's
(``asyncio.timeout``), so one clock governs a whole attempt.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import AsyncIterator
from typing import Any

import aiohttp


class HttpStatusError(Exception):
    """A non-2xx answer: its status, the parsed body (or its text) and the server's Retry-After."""

    def __init__(self, status_code: int, body: Any, retry_after: float | None) -> None:
        detail = body.get("error", body) if isinstance(body, dict) else body
        if isinstance(detail, dict) and isinstance(detail.get("message"), str):
            detail = detail["message"]
        self.message = f"Error code: {status_code} - {detail}"
        super().__init__(self.message)
        self.status_code = status_code
        self.body = body
        self.retry_after = retry_after


class HttpConnectionError(Exception):
    """The server could not be reached, or the connection broke before the reply was complete."""


class HttpReplyError(ValueError):
    """A 2xx whose body is not JSON (a proxy's page, a server crashing mid-write)."""


def _retry_after(value: str | None) -> float | None:
    """The seconds form of Retry-After (the only one model servers send); anything else is none."""
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _parse(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:  # JSONDecodeError, or bytes that are not UTF-8
        return None


async def _close_with_loop(sessions: dict[tuple[str, str], Any], key: tuple[str, str]) -> AsyncIterator[None]:
    """Started once per session: ``asyncio.run`` finalises pending async generators as its loop
    ends, which closes the session on the loop that owns it (no "unclosed session" noise) and
    drops it, so the finished loop can be freed."""
    try:
        yield
    finally:
        session, _ = sessions.pop(key)
        await session.close()


class _Pools:
    """One aiohttp session per event loop and (base URL, API key); asyncio objects must not cross
    loops, and Ray runs each concurrency group of an async actor on a loop of its own."""

    def __init__(self) -> None:
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], Any]] = (
            weakref.WeakKeyDictionary()
        )

    async def session(self, base_url: str, api_key: str) -> aiohttp.ClientSession:
        sessions = self._by_loop.setdefault(asyncio.get_running_loop(), {})
        key = (base_url, api_key)
        if key not in sessions:
            session = aiohttp.ClientSession(
                base_url.rstrip("/") + "/",
                connector=aiohttp.TCPConnector(limit=0),  # the client's semaphore bounds calls in flight
                timeout=aiohttp.ClientTimeout(total=None),
                headers={"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"},
                skip_auto_headers=("User-Agent",),
            )
            closer = _close_with_loop(sessions, key)
            sessions[key] = (session, closer)
            await anext(closer)
        return sessions[key][0]


_POOLS = _Pools()


async def post_json(base_url: str, path: str, body: Any, *, api_key: str) -> Any:
    """POST ``body`` as JSON to ``base_url + path`` and return the reply's JSON."""
    session = await _POOLS.session(base_url, api_key)
    try:
        async with session.post(path.lstrip("/"), data=json.dumps(body).encode()) as response:
            raw = await response.read()
            status, retry_after = response.status, response.headers.get("Retry-After")
    except aiohttp.ClientError as exc:
        raise HttpConnectionError(f"{base_url}{path}: {type(exc).__name__}: {exc}") from exc
    parsed = _parse(raw)
    if not 200 <= status < 300:
        raise HttpStatusError(status, parsed if parsed is not None else raw.decode(errors="replace"),
                              _retry_after(retry_after))
    if parsed is None:
        raise HttpReplyError(f"{base_url}{path} answered {status} with a body that is not JSON: {raw[:200]!r}")
    return parsed
