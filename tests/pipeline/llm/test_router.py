"""Routing: the pure table, then the shared Router actor on real Ray with stub servers as replicas."""

from __future__ import annotations

import asyncio
import socket
from collections import Counter
from collections.abc import Iterator

import pytest
import ray

from flowstate.chat import ChatMessage
from pipeline.llm import (
    ChatClient,
    ClientSettings,
    ModelUnavailableError,
    RetryPolicy,
    Router,
    RouterEndpoints,
    RoutingTable,
)
from pipeline.llm.kinds.replica_sim.server import StubServer

URLS = ["http://a/v1", "http://b/v1", "http://c/v1"]


def test_a_session_sticks_to_its_replica() -> None:
    table = RoutingTable(URLS, seed=1)
    first = table.assign("s1")
    for other in range(5):
        table.assign(f"other-{other}")
    assert all(table.assign("s1") == first for _ in range(10))


def test_new_sessions_go_to_the_least_loaded_replica() -> None:
    table = RoutingTable(URLS, seed=2)
    placed = {f"s{i}": table.assign(f"s{i}") for i in range(9)}
    assert Counter(placed.values()) == {url: 3 for url in URLS}
    drained = placed["s0"]
    for session in [s for s, url in placed.items() if url == drained][1:]:
        table.release(session)
    assert table.load(drained) == 1
    assert table.assign("new") == drained
    assert table.assign("newer") == drained  # 2 against 3 and 3


def test_ties_are_broken_at_random() -> None:
    seen = Counter(RoutingTable(URLS, seed=seed).assign("s") for seed in range(300))
    assert set(seen) == set(URLS)
    assert min(seen.values()) > 60  # roughly uniform over three


def test_a_removed_replica_loses_its_sessions_to_live_ones() -> None:
    table = RoutingTable(URLS[:2], seed=3)
    sessions = [f"s{i}" for i in range(4)]
    before = {s: table.assign(s) for s in sessions}
    dead = before["s0"]
    table.remove(dead)
    after = {s: table.assign(s) for s in sessions}
    assert all(url != dead for url in after.values())
    assert all(after[s] == before[s] for s in sessions if before[s] != dead)  # the others stay put
    assert table.dead == [dead]
    table.remove(after["s0"])
    with pytest.raises(ModelUnavailableError, match="no live replica"):
        table.assign("s0")


def test_rebalance_margin_moves_a_session_off_an_overloaded_replica() -> None:
    sticky = RoutingTable(URLS[:2], seed=4)
    balanced = RoutingTable(URLS[:2], rebalance_margin=1, seed=4)
    for table in (sticky, balanced):
        placed = {f"s{i}": table.assign(f"s{i}") for i in range(6)}
        hot = placed["s0"]
        for session, url in placed.items():  # the tail of a sweep: the other replica drains
            if url != hot:
                table.release(session)
    assert sticky.assign("s0") == hot
    assert balanced.assign("s0") != hot


def test_least_loaded_routing_places_every_call_afresh_and_keeps_loads_level() -> None:
    sticky = RoutingTable(URLS, seed=5)
    spread = RoutingTable(URLS, seed=5, routing="least_loaded")
    sessions = [f"s{i}" for i in range(30)]
    for table in (sticky, spread):
        for session in sessions:
            table.assign(session)
    moves = {id(t): 0 for t in (sticky, spread)}
    for _ in range(20):
        for table in (sticky, spread):
            for session in sessions:
                before = table._where[session]
                moves[id(table)] += table.assign(session) != before
                # A session counts where it is: from level loads it may move to a tied replica.
                assert max(map(table.load, URLS)) - min(map(table.load, URLS)) <= 2
    assert moves[id(sticky)] == 0
    assert moves[id(spread)] > 0.5 * 20 * len(sessions)  # about two calls in three change replica
    assert sum(map(spread.load, URLS)) == len(sessions)


# -- the Router actor ------------------------------------------------------------------------
@pytest.fixture
def two_stubs() -> Iterator[list[StubServer]]:
    with StubServer() as a, StubServer() as b:
        yield [a, b]


@pytest.fixture
def router(ray_local: None, two_stubs: list[StubServer]) -> Iterator[ray.actor.ActorHandle]:
    handle = Router.remote("/v1/models", *[stub.url for stub in two_stubs], seed=0)
    yield handle
    ray.kill(handle)


@pytest.mark.slow
def test_router_actor_routes_and_keeps_live_replicas(
    router: ray.actor.ActorHandle, two_stubs: list[StubServer]
) -> None:
    urls = [ray.get(router.assign.remote(f"s{i}")) for i in range(4)]
    assert Counter(urls) == {two_stubs[0].url: 2, two_stubs[1].url: 2}
    assert ray.get(router.assign.remote("s0")) == urls[0]
    assert ray.get(router.report_failure.remote(urls[0])) is True  # alive: a blip, nothing moves
    assert ray.get(router.snapshot.remote())["dead"] == []
    ray.get(router.release.remote("s0"))
    assert "s0" not in ray.get(router.snapshot.remote())["sessions"][urls[0]]


@pytest.mark.slow
def test_router_takes_out_a_dead_replica_and_moves_its_sessions(
    router: ray.actor.ActorHandle, two_stubs: list[StubServer]
) -> None:
    urls = {f"s{i}": ray.get(router.assign.remote(f"s{i}")) for i in range(4)}
    two_stubs[0].stop()
    assert ray.get(router.report_failure.remote(two_stubs[0].url)) is False
    snapshot = ray.get(router.snapshot.remote())
    assert snapshot["dead"] == [two_stubs[0].url]
    for session in urls:
        assert ray.get(router.assign.remote(session)) == two_stubs[1].url


@pytest.mark.slow
def test_routed_client_fails_over_mid_conversation(
    router: ray.actor.ActorHandle, two_stubs: list[StubServer]
) -> None:
    settings = ClientSettings(timeout_s=5, retry=RetryPolicy(max_attempts=3, initial_backoff_s=0.01))
    clients = [ChatClient(RouterEndpoints(router, f"episode-{i}/agent"), "m", settings=settings) for i in range(4)]
    messages = [ChatMessage(role="user", content="hi")]

    async def round_() -> list[str]:
        return [str((await c.complete(messages)).served_by) for c in clients]

    first = asyncio.run(round_())
    assert asyncio.run(round_()) == first  # sticky
    victim, survivor = two_stubs
    assert victim.url in first and survivor.url in first
    victim.stop()
    assert asyncio.run(round_()) == [survivor.url] * 4  # no exception reaches the caller
    assert ray.get(router.snapshot.remote())["dead"] == [victim.url]
    survivor.stop()
    with pytest.raises(ModelUnavailableError, match="no live replica"):
        asyncio.run(round_())


@pytest.mark.slow
def test_routing_goes_on_while_a_health_check_waits_on_a_hung_replica(
    ray_local: None, two_stubs: list[StubServer]
) -> None:
    # A socket that accepts connections (kernel backlog) and never answers: a hung server.
    with socket.create_server(("127.0.0.1", 0)) as hung:
        hung_url = f"http://127.0.0.1:{hung.getsockname()[1]}/v1"
        router = Router.remote("/v1/models", hung_url, two_stubs[0].url, liveness_timeout_s=6.0, seed=0)
        try:
            ray.get(router.snapshot.remote())
            check = router.report_failure.remote(hung_url)
            ray.get([router.assign.remote(f"s{i}") for i in range(20)])
            assert ray.wait([check], timeout=0)[0] == []  # routed while the 6 s check of the hung one still waits
            assert ray.get(router.snapshot.remote(), timeout=2)["dead"] == []  # still checking
            assert ray.get(check) is False
            assert ray.get(router.snapshot.remote())["dead"] == [hung_url]
        finally:
            ray.kill(router)
