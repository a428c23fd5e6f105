"""Calls per second against the stub server at 1/8/64/256 concurrency, as a fraction of ideal.

Ideal throughput at concurrency c with a fixed server delay d is c / d calls per second. Two
figures per level: the stub server alone (driven by a minimal keep-alive HTTP/1.1 client, so the
server is what is measured) and through ``ChatClient`` (the client's per-call cost added).
The stub runs in its own process, as a real server would.

    .venv/bin/python perf/llm_stub_capacity.py [--delay 0.2] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator

from machine import machine

from flowstate.chat import ChatMessage
from pipeline.llm import ChatClient, ClientSettings
from pipeline.llm.kinds.replica_sim.server import RawConnection

CONCURRENCY = (1, 8, 64, 256)
MESSAGES = [ChatMessage(role="user", content="ping " * 50)]


@contextlib.contextmanager
def stub_process(delay: float) -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.llm.kinds.replica_sim.server", "--delay", str(delay)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None  # stdout=PIPE
    try:
        yield json.loads(proc.stdout.readline())["url"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def raw_caller(url: str) -> Callable[[], Awaitable[None]]:
    connection = await RawConnection.open(url)
    body = {"model": "stub", "messages": [m.model_dump() for m in MESSAGES]}

    async def call() -> None:
        await connection.post("/v1/chat/completions", body)

    return call


async def client_caller(url: str, concurrency: int) -> Callable[[], Awaitable[None]]:
    client = ChatClient(url, "stub", settings=ClientSettings(max_in_flight=concurrency, timeout_s=60))

    async def call() -> None:
        await client.complete(MESSAGES)

    return call


async def measure(callers: list[Callable[[], Awaitable[None]]], seconds: float) -> float:
    """Calls per second with each caller looping back to back for ``seconds``."""
    await asyncio.gather(*(call() for call in callers))  # connect / warm up outside the timing
    started = time.perf_counter()
    deadline = started + seconds
    done = 0

    async def loop(call: Callable[[], Awaitable[None]]) -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await call()
            done += 1

    await asyncio.gather(*(loop(call) for call in callers))
    return done / (time.perf_counter() - started)


async def level(url: str, concurrency: int, seconds: float) -> tuple[float, float]:
    raw = [await raw_caller(url) for _ in range(concurrency)]
    through_client = [await client_caller(url, concurrency)] * concurrency
    return await measure(raw, seconds), await measure(through_client, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    print(machine())
    print(f"stub server in its own process, delay {args.delay * 1000:.0f} ms, {args.seconds:.0f} s per level")
    print(f"{'concurrency':>11} {'ideal/s':>8} {'server/s':>9} {'fraction':>8} {'client/s':>9} {'fraction':>8}")
    with stub_process(args.delay) as url:
        for concurrency in CONCURRENCY:
            ideal = concurrency / args.delay
            raw, client = asyncio.run(level(url, concurrency, args.seconds))
            print(f"{concurrency:>11} {ideal:>8.0f} {raw:>9.1f} {raw / ideal:>8.2f} "
                  f"{client:>9.1f} {client / ideal:>8.2f}")


if __name__ == "__main__":
    main()
