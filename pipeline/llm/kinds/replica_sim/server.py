"""The stand-in OpenAI-compatible server: each simulated replica of ``kind: replica_sim``, and the model
server of tests and benchmarks.

A real HTTP server (uvicorn with a bare ASGI app, one event loop: no thread per request) speaking
``/v1/chat/completions``, ``/v1/embeddings`` and ``/v1/models``. Replies come from a pluggable async responder; a
fixed delay imitates model latency. Calls fail the way real servers do (see :class:`Fault`: status codes
with engine error texts and ``Retry-After``, bodies that are not JSON or cut short, connections dropped
mid-reply, hangs, empty choice lists, completions that run to ``max_tokens``): the next calls with
:meth:`StubServer.inject`, or a share of all calls at per-kind rates (:class:`FaultRates`), drawn
reproducibly per conversation. ``StubServer.received`` says which call got which fault.
Token counts are whitespace words, so tests can predict them. Embeddings are deterministic:
each word hashed into one of ``embedding_dims`` buckets, the counts L2-normalised (texts sharing
words are similar, which is all a retrieval test needs).

**Replica mode** (``replica=ReplicaSettings(...)``): the server stands for one GPU replica. Every
chat call goes through a simulated engine (:mod:`.engine`: prefix cache, continuous batching, latencies
on a scaled clock) and reports ``usage.prompt_tokens_details.cached_tokens`` as vLLM does; tokens are
:func:`~.engine.sim_token_ids`, in ``usage``, in ``/tokenize`` and in the cache alike; ``GET /sim/stats``
returns the engine's figures.

``python -m pipeline.llm.kinds.replica_sim.server --delay 0.2`` runs it in its own process (benchmarks);
``--replica '{"time_scale": 4}'`` in replica mode, ``--fixture-outputs`` answering what each request
asks for in its ``fixture_output`` field (a scripted agent's output, which the server then plays),
``--faults '{"seed": 1, "rates": [{"fault": {"kind": "status", "status": 503}, "rate": 0.05}]}'`` failing calls.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import itertools
import json
import logging
import math
import signal
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import uvicorn
from pydantic import BaseModel, ConfigDict, Field, model_validator

from pipeline.llm.asgi import read_body, send_json
from pipeline.llm.kinds.replica_sim.engine import ReplicaSettings, SimulatedReplica, sim_token_ids

# messages, whole request body -> reply text (None: a reply whose content is null).
Responder = Callable[[list[dict[str, Any]], dict[str, Any]], Awaitable[str | None]]


@dataclass(frozen=True)
class CutShort:
    """A reply whose connection closes after half of ``payload``, the whole of which its headers promise."""

    payload: bytes


# status, JSON body (or raw bytes, or a reply cut short), extra headers
Reply = tuple[int, dict[str, Any] | bytes | CutShort, dict[str, str]]

async def echo(messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
    """Default responder: repeats the last message."""
    return f"echo: {messages[-1]['content']}" if messages else "echo:"


# How the server fails a call; what the client makes of each: pipeline/llm/faults.py.
InjectedKind = Literal["status", "garbage", "truncated", "drop", "hang", "no_choices", "length"]


# The request field in which a TEST FIXTURE client names the output it wants (see fixture_output).
FIXTURE_OUTPUT = "fixture_output"


async def fixture_output(messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
    """TEST FIXTURE responder: the text the request names in ``fixture_output`` (a scripted agent's
    output, written by the client, so that its state stays with the episode whichever server
    answers); an echo for a request without one."""
    text = body.get(FIXTURE_OUTPUT)
    return text if isinstance(text, str) else await echo(messages, body)


class Fault(BaseModel):
    """How a call fails. ``status``: that HTTP status with ``message`` as vLLM words errors (and a
    ``Retry-After`` header when ``retry_after`` is set); ``garbage``: a 200 whose body is not JSON;
    ``truncated``: a 200 whose JSON reply is cut in half; ``drop``: the connection closed after half
    the reply its headers announce; ``hang``: no answer for an hour; ``no_choices``: a 200 with an
    empty choice list; ``length``: the answer as from a model that ran on until ``max_tokens`` (its
    words repeated and cut at the request's ``max_tokens``, ``finish_reason: length``; an
    embeddings call is answered as usual). Faults come before the responder is asked, but for
    ``length``: a stateful responder (the oracle) is not advanced by a call that failed.
    ``times``: how many calls :meth:`StubServer.inject` fails (``None``: every call until cleared)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: InjectedKind
    times: int | None = None
    status: int = 500
    message: str = "internal error"
    retry_after: float | None = None


class FaultRate(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    fault: Fault
    rate: float = Field(ge=0, le=1)  # the share of calls it fails


class FaultRates(BaseModel):
    """Faults at per-kind rates (their sum at most 1). Reproducible: whether the ``n``-th call of a
    conversation (the request's OpenAI ``user`` field) fails, and how, depends on the seed, the
    conversation and ``n`` only, so concurrent conversations draw the same faults however their
    calls interleave."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rates: list[FaultRate]
    seed: int = 0

    @model_validator(mode="after")
    def _at_most_every_call(self) -> FaultRates:
        if sum(r.rate for r in self.rates) > 1 + 1e-9:
            raise ValueError(f"fault rates add up to {sum(r.rate for r in self.rates):g}, more than every call")
        return self

    def draw(self, conversation: str, n: int) -> Fault | None:
        digest = hashlib.blake2b(f"{self.seed}/{conversation}/{n}".encode(), digest_size=8).digest()
        u = int.from_bytes(digest, "big") / 2**64
        for r in self.rates:
            if u < r.rate:
                return r.fault
            u -= r.rate
        return None


@dataclass(frozen=True)
class Received:
    """One POST as the server saw it: its conversation, its number in it (from 0), when it arrived
    (``time.monotonic()``) and the fault it got (``None``: answered)."""

    conversation: str
    n: int
    at: float
    fault: Fault | None


def _words(text: str | None) -> int:
    return len(text.split()) if text else 0


def _word_ids(text: str | None) -> list[int]:
    return [int.from_bytes(hashlib.blake2b(w.encode(), digest_size=4).digest(), "big") % 50_000
            for w in (text or "").split()]


def _message_ids(messages: Any, token_ids: Callable[[str | None], list[int]]) -> list[int]:
    """A chat prompt's tokens: its messages' contents, in order (no template markers)."""
    return [i for m in messages if isinstance(m, dict) for i in token_ids(m.get("content"))]


def _tokenize(body: dict[str, Any], token_ids: Callable[[str | None], list[int]], max_model_len: int) -> dict[str, Any]:
    """vLLM's ``/tokenize`` in the stub's token model (chat messages contribute their contents, as
    the stub's ``prompt_tokens`` counts them)."""
    messages = body.get("messages")
    ids = _message_ids(messages, token_ids) if isinstance(messages, list) else token_ids(body.get("prompt"))
    return {"tokens": ids, "count": len(ids), "max_model_len": max_model_len}


def hashed_embedding(text: str, dims: int) -> list[float]:
    """The stand-in's embedding of ``text``: a normalised bag of hashed, lower-cased words."""
    vector = [0.0] * dims
    for word in text.lower().split():
        vector[int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % dims] += 1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


class StubServer:
    """Start with ``with StubServer(...) as stub:``; ``stub.url`` ends in ``/v1``."""

    def __init__(
        self,
        responder: Responder = echo,
        *,
        delay_s: float = 0.0,
        model: str = "stub-model",
        cached_tokens: int | None = None,
        port: int = 0,
        embedding_dims: int = 32,
        replica: ReplicaSettings | None = None,
        host: str = "127.0.0.1",
        faults: FaultRates | None = None,
    ) -> None:
        self.responder = responder
        self.faults = faults  # may be changed while serving
        self.embedding_dims = embedding_dims
        self.delay_s = delay_s
        self.model = model
        self.cached_tokens = cached_tokens  # reported as usage.prompt_tokens_details when set
        self.replica = SimulatedReplica(replica) if replica is not None else None
        self._token_ids = sim_token_ids if replica is not None else _word_ids
        self._max_model_len = replica.max_model_len if replica is not None else 8192
        self.requests: list[dict[str, Any]] = []  # every chat and embeddings request body received, in order
        self.authorizations: list[str] = []  # their Authorization headers, in the same order
        self.received: list[Received] = []  # and what became of them, in the same order
        self._calls: defaultdict[str, int] = defaultdict(int)  # per conversation
        self._fault: Fault | None = None
        self._fault_left: int | None = None
        self._ids = itertools.count()
        # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets that say so; without it,
        # Nagle + delayed ACK add 40 ms to every keep-alive response.
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, port))
        self._socket.listen(4096)
        self.port: int = self._socket.getsockname()[1]
        self.url = f"http://{host}:{self.port}/v1"
        config = uvicorn.Config(self._app, interface="asgi3", log_level="warning", lifespan="off", access_log=False,
                                timeout_graceful_shutdown=1, backlog=4096)
        self._server = uvicorn.Server(config)
        logging.getLogger("uvicorn.error").addFilter(_CUT_SHORT_ON_PURPOSE)  # once, however many servers
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> StubServer:
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]},
                                        name=f"stub-server-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("stub server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._socket.close()

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def serve_forever(self) -> None:
        """Serve in the calling thread until interrupted."""
        self._server.run(sockets=[self._socket])

    # -- faults --------------------------------------------------------------------------
    def inject(self, kind: InjectedKind, **options: Any) -> None:
        """Make the next calls fail (before any drawn at :attr:`faults` rates); see :class:`Fault`."""
        self._fault = Fault(kind=kind, **options)
        self._fault_left = self._fault.times

    def clear(self) -> None:
        """No more injected faults (rates stay: set :attr:`faults` to ``None``)."""
        self._fault = None

    def _take_fault(self, body: dict[str, Any]) -> Fault | None:
        user = body.get("user")
        conversation = user if isinstance(user, str) else ""
        n = self._calls[conversation]
        self._calls[conversation] += 1
        fault = self._fault
        if fault is not None and self._fault_left is not None:
            self._fault_left -= 1
            if self._fault_left <= 0:
                self._fault = None
        if fault is None and self.faults is not None:
            fault = self.faults.draw(conversation, n)
        self.received.append(Received(conversation, n, time.monotonic(), fault))
        return fault

    # -- HTTP ----------------------------------------------------------------------------
    async def _app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """A bare ASGI app: a framework's routing and request objects would halve the capacity."""
        path, method = scope["path"], scope["method"]
        status: int
        body: dict[str, Any] | bytes | CutShort
        headers: dict[str, str]
        if method == "GET" and path == "/v1/models":
            status, body, headers = 200, {"object": "list", "data": [{"id": self.model, "object": "model"}]}, {}
        elif method == "POST" and path == "/v1/chat/completions":
            self.authorizations.append(dict(scope["headers"]).get(b"authorization", b"").decode())
            status, body, headers = await self._admit(json.loads(await read_body(receive)), self._chat)
        elif method == "POST" and path == "/v1/embeddings":
            status, body, headers = await self._admit(json.loads(await read_body(receive)), self._embeddings)
        elif method == "POST" and path == "/tokenize":  # vLLM's, at the server's root
            status, body, headers = 200, _tokenize(json.loads(await read_body(receive)), self._token_ids,
                                                   self._max_model_len), {}
        elif method == "GET" and path == "/sim/stats" and self.replica is not None:
            status, body, headers = 200, self.replica.stats(), {}
        else:
            status, body, headers = 404, {"error": {"message": f"no route {method} {path}"}}, {}
        if isinstance(body, CutShort):
            await _send_cut_short(send, status, body.payload)
        else:
            await send_json(send, status, body, headers)

    async def _admit(self, body: dict[str, Any], answer: Callable[[dict[str, Any]], Awaitable[Reply]]) -> Reply:
        """Every POST: recorded, delayed, failed if a fault is pending or drawn, else answered by its route."""
        self.requests.append(body)
        fault = self._take_fault(body)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if fault is None:
            return await answer(body)
        if fault.kind == "length":
            return _run_on(await answer(body), body.get("max_tokens") or LENGTH_DEFAULT_MAX_TOKENS)
        return await self._fail(fault, body)

    async def _chat(self, body: dict[str, Any]) -> Reply:
        messages = body.get("messages", [])
        text = await self.responder(messages, body)
        if self.replica is None:  # words counted, not hashed: the plain stub stays cheap per call
            prompt_tokens = sum(_words(m.get("content")) for m in messages)
            return 200, self._reply(body, text, prompt_tokens, _words(text), self.cached_tokens), {}
        prompt, output = _message_ids(messages, self._token_ids), self._token_ids(text)
        if len(prompt) + max(1, len(output)) > self._max_model_len:  # vLLM refuses a request over its context the same way
            return 400, _error(400, f"This model's maximum context length is {self._max_model_len} tokens. However, "
                                    f"you requested {len(prompt) + len(output)} tokens ({len(prompt)} in the "
                                    f"messages, {len(output)} in the completion)."), {}
        served = await self.replica.serve(prompt, output, body.get("user"))
        return 200, self._reply(body, text, len(prompt), len(output), served.cached_tokens), {}

    async def _embeddings(self, body: dict[str, Any]) -> Reply:
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return 400, {"object": "error", "error": {"message": "input must be a string or a list of strings",
                                                      "type": "BadRequestError", "param": "input", "code": 400}}, {}
        data = [{"object": "embedding", "index": i, "embedding": hashed_embedding(t, self.embedding_dims)}
                for i, t in enumerate(texts)]
        tokens = sum(_words(t) for t in texts)
        return 200, {"object": "list", "data": data, "model": body.get("model", self.model),
                     "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}, {}

    async def _fail(self, fault: Fault, body: dict[str, Any]) -> Reply:
        if fault.kind == "hang":
            await asyncio.sleep(3600)
        if fault.kind == "garbage":
            return 200, b"<html>\x00 upstream exploded", {}
        if fault.kind == "no_choices":
            return 200, {"id": "x", "object": "chat.completion", "created": 0, "model": self.model,
                         "choices": []}, {}
        if fault.kind in ("truncated", "drop"):
            whole = json.dumps(self._reply(body, "a reply that never arrives whole", 0, 6, None)).encode()
            return 200, (whole[: len(whole) // 2] if fault.kind == "truncated" else CutShort(whole)), {}
        headers = {"retry-after": str(fault.retry_after)} if fault.retry_after is not None else {}
        return fault.status, _error(fault.status, fault.message), headers

    def _reply(self, body: dict[str, Any], text: str | None, prompt_tokens: int, completion_tokens: int,
               cached_tokens: int | None) -> dict[str, Any]:
        usage: dict[str, Any] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                                 "total_tokens": prompt_tokens + completion_tokens}
        if cached_tokens is not None:  # vLLM's shape (--enable-prompt-tokens-details)
            usage["prompt_tokens_details"] = {"cached_tokens": min(cached_tokens, prompt_tokens)}
        return {
            "id": f"chatcmpl-{next(self._ids)}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", self.model),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": usage,
        }


LENGTH_DEFAULT_MAX_TOKENS = 16  # where a request runs on to max_tokens without naming any


def _run_on(reply: Reply, max_tokens: int) -> Reply:
    """A chat answer as a model that kept going would give it: its words repeated up to
    ``max_tokens`` words, cut there, ``finish_reason: length`` (other answers as they are)."""
    status, body, headers = reply
    if status != 200 or not isinstance(body, dict) or not body.get("choices"):
        return reply
    choice = body["choices"][0]
    words = (choice["message"]["content"] or "").split() or ["…"]
    text = " ".join((words * (max_tokens // len(words) + 1))[:max_tokens])
    usage = {**body["usage"], "completion_tokens": max_tokens, "total_tokens": body["usage"]["prompt_tokens"] + max_tokens}
    choice = {**choice, "finish_reason": "length", "message": {**choice["message"], "content": text}}
    return status, {**body, "choices": [choice], "usage": usage}, headers


class _CutShortOnPurpose(logging.Filter):
    """uvicorn complains about every reply a ``drop`` fault leaves unfinished; that one is meant."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "ASGI callable returned without completing response."


_CUT_SHORT_ON_PURPOSE = _CutShortOnPurpose()


async def _send_cut_short(send: Any, status: int, payload: bytes) -> None:
    """Announce ``payload``, send half of it, and return: the server closes the connection."""
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload[: len(payload) // 2], "more_body": True})


def _error(status: int, message: str) -> dict[str, Any]:
    """An error body as vLLM's OpenAI server writes it."""
    return {"object": "error", "error": {"message": message, "type": "BadRequestError" if status == 400 else "ServerError",
                                         "param": None, "code": status}}


class RawConnection:
    """One keep-alive HTTP/1.1 connection posting JSON: next to no client cost, so load tests
    and benchmarks measure the server rather than a client library."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str) -> None:
        self._reader, self._writer, self._host = reader, writer, host

    @classmethod
    async def open(cls, url: str) -> RawConnection:
        host, port = url.removeprefix("http://").split("/")[0].split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        return cls(reader, writer, host)

    async def post(self, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
        """``path`` from the server root (``/v1/chat/completions``) -> (status, response body)."""
        data = json.dumps(body).encode()
        self._writer.write(f"POST {path} HTTP/1.1\r\nhost: {self._host}\r\ncontent-type: application/json\r\n"
                           f"content-length: {len(data)}\r\n\r\n".encode() + data)
        head = (await self._reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        length = next(int(line.split(":")[1]) for line in head if line.lower().startswith("content-length:"))
        return int(head[0].split()[1]), await self._reader.readexactly(length)

    async def close(self) -> None:
        self._writer.close()
        await self._writer.wait_closed()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--model", default="stub-model", help="the model name it answers to")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each reply")
    parser.add_argument("--replica", type=ReplicaSettings.model_validate_json, default=None,
                        help="replica mode: the simulated engine's settings as JSON ('{}': the defaults)")
    parser.add_argument("--fixture-outputs", action="store_true",
                        help="TEST FIXTURE: answer with each request's fixture_output field where it has one")
    parser.add_argument("--faults", type=FaultRates.model_validate_json, default=None,
                        help="fail calls at these per-kind rates (FaultRates as JSON)")
    parser.add_argument("--stats-out", type=Path, default=None,
                        help="replica mode: write the engine's figures (GET /sim/stats) here as JSON on exit")
    args = parser.parse_args()
    server = StubServer(fixture_output if args.fixture_outputs else echo, delay_s=args.delay, port=args.port,
                        host=args.host, model=args.model, replica=args.replica, faults=args.faults)
    print(json.dumps({"url": server.url}), flush=True)
    # uvicorn re-raises the signal that stopped it: as KeyboardInterrupt for both, so the figures get written.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    if args.stats_out is not None and server.replica is not None:
        args.stats_out.parent.mkdir(parents=True, exist_ok=True)
        args.stats_out.write_text(json.dumps(server.replica.stats()))


if __name__ == "__main__":
    main()
