"""Sticky, least-loaded routing of conversations over the replicas of one deployment.

One ``Router`` actor per deployment is shared by every episode actor of a sweep. A conversation
(session id + role) sticks to the replica that served it before, so that replica's prefix cache
holds its history; a new conversation goes to the replica with the fewest active conversations,
ties broken at random. A client whose connection fails reports the URL; the router checks the
server and, if it is dead, takes it out: its conversations move to live replicas on their next
call. ``rebalance_margin`` is the escape from pure stickiness: a conversation whose replica has
more than that many conversations above the least-loaded one moves there (one cache miss).
``routing="least_loaded"`` drops stickiness altogether: every call goes to a replica with the fewest
conversations (the one it was on counting), ties at random, as a balancer without affinity would;
it is there to measure what stickiness is worth (``perf/replica_sim.py``).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterable
from typing import Any, Literal

import ray

from pipeline.llm.errors import ModelUnavailableError
from pipeline.llm.health import is_alive
from pipeline.llm.prefix import PrefixMemory

# How a replicated deployment's router places calls: sticky (with the rebalancing margin), or least-loaded.
Routing = Literal["sticky", "least_loaded"]


class RoutingTable:
    """The routing decisions, without Ray or I/O (so they can be tested directly)."""

    def __init__(self, urls: Iterable[str], *, rebalance_margin: int | None = None, seed: int | None = None,
                 routing: Routing = "sticky") -> None:
        self.sessions: dict[str, set[str]] = {url: set() for url in urls}  # live replica -> its sessions
        self.dead: list[str] = []
        self._where: dict[str, str] = {}
        self._rebalance_margin = rebalance_margin
        self._sticky = routing == "sticky"
        self._rng = random.Random(seed)

    def load(self, url: str) -> int:
        return len(self.sessions[url])

    def assign(self, session: str) -> str:
        if not self.sessions:
            raise ModelUnavailableError(f"no live replica left (dead: {', '.join(self.dead)})")
        current = self._where.get(session)
        least = min(self.load(url) for url in self.sessions)
        if current is not None and self._sticky:
            margin = self._rebalance_margin
            if margin is None or self.load(current) - least <= margin:
                return current
            self.release(session)
            least = min(self.load(url) for url in self.sessions)
        url = self._rng.choice([url for url in self.sessions if self.load(url) == least])
        if url != self._where.get(session):  # least-loaded routing may pick the replica it is on
            self.release(session)
            self.sessions[url].add(session)
            self._where[session] = url
        return url

    def release(self, session: str) -> None:
        url = self._where.pop(session, None)
        if url is not None:
            self.sessions[url].discard(session)

    def remove(self, url: str) -> None:
        """Take a dead replica out; its sessions are reassigned when they next ask."""
        for session in self.sessions.pop(url, set()):
            self._where.pop(session, None)
        self.dead.append(url)


class _Router:
    """The shared actor around a :class:`RoutingTable`.

    ``report_failure`` and ``snapshot`` run in their own concurrency group (their own event loop
    thread and call limit), so a flood of ``assign`` calls cannot starve them and a health check
    waiting on a hung server does not hold up routing; a lock keeps the table consistent across
    the two threads (it is never held across an ``await``).
    """

    def __init__(self, liveness_path: str, *urls: str, rebalance_margin: int | None = None,
                 liveness_timeout_s: float = 10.0, seed: int | None = None, routing: Routing = "sticky") -> None:
        # URLs are positional so that a deployment can pass the replicas' start() refs: Ray then
        # starts this actor's process while the servers load and runs __init__ once they are up.
        self._table = RoutingTable(urls, rebalance_margin=rebalance_margin, seed=seed, routing=routing)
        self._liveness_path = liveness_path
        self._liveness_timeout_s = liveness_timeout_s
        self._prefixes = PrefixMemory()
        self._lock = threading.Lock()

    async def assign(self, session: str) -> str:
        with self._lock:
            return self._table.assign(session)

    async def release(self, session: str) -> None:
        with self._lock:
            self._table.release(session)

    async def shared_prefix(self, url: str, prompt_text: str, completion_text: str) -> int:
        """Prefix shared with the previous prompt + completion this router saw on ``url``."""
        with self._lock:
            return self._prefixes.observe(url, prompt_text, completion_text)

    @ray.method(concurrency_group="control")
    async def report_failure(self, url: str) -> bool:
        """Check ``url``'s server; if it is dead, take it out. Returns whether it is alive."""
        with self._lock:
            if url not in self._table.sessions:
                return False
        root = url.removesuffix("/v1")
        if await is_alive(root + self._liveness_path, self._liveness_timeout_s):
            return True
        with self._lock:
            if url in self._table.sessions:
                self._table.remove(url)
                self._prefixes.forget(url)
        return False

    @ray.method(concurrency_group="control")
    async def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {"sessions": {url: sorted(s) for url, s in self._table.sessions.items()},
                    "dead": list(self._table.dead)}


Router = ray.remote(num_cpus=0, concurrency_groups={"control": 4})(_Router)  # type: ignore[call-overload]  # not in ray's stubs


class RouterEndpoints:
    """The client side of a router: one conversation's calls go where the router says."""

    def __init__(self, router: Any, session: str) -> None:
        self.router = router
        self.session = session

    def __repr__(self) -> str:
        return f"RouterEndpoints(session={self.session!r})"

    async def acquire(self) -> str:
        return await self.router.assign.remote(self.session)

    async def report_failure(self, url: str) -> None:
        await self.router.report_failure.remote(url)

    async def shared_prefix(self, url: str, prompt_text: str, completion_text: str) -> int:
        return await self.router.shared_prefix.remote(url, prompt_text, completion_text)

    async def release(self) -> None:
        await self.router.release.remote(self.session)
