"""The two halves of a bare ASGI exchange that the project's HTTP servers share (the stub server,
the embeddings server): read a request body, send a JSON answer."""

from __future__ import annotations

import json
from typing import Any


async def read_body(receive: Any) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def send_json(send: Any, status: int, body: dict[str, Any] | bytes, headers: dict[str, str] | None = None) -> None:
    """Answer with ``body`` (a JSON object, or raw bytes sent as they are) and ``headers``."""
    payload = body if isinstance(body, bytes) else json.dumps(body).encode()
    raw_headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    raw_headers += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": payload})
