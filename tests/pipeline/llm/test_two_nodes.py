"""On a cluster of two nodes (both on this machine): the driver's own actors stay on its node,
replicas spread over both, and a node killed whole takes only its replica; the router, beside the
driver, moves that replica's conversation to the other."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
import ray

from flowstate.chat import ChatMessage
from pipeline.llm.deployments import make_deployment
from pipeline.llm.kinds.replica_sim import ReplicaSimSpec
from pipeline.llm.kinds.replica_sim.engine import ReplicaSettings
from pipeline.llm.placement import on_this_node
from pipeline.testing.cluster import actor_processes, descendants, kill_node, raylet
from tests.conftest import start_ray

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[tuple[Any, Any]]:
    """A head and a second node, this process the driver (in place of the session's Ray, which
    comes back afterwards)."""
    from ray.cluster_utils import Cluster

    restart = ray.is_initialized()
    ray.shutdown()
    # Ray's files, with the address file a Cluster writes (which a bare ray.init() elsewhere on the
    # machine would join), in a folder of the test's own, short enough for Ray's socket paths.
    folder = tempfile.mkdtemp(prefix="ray-")
    try:
        with mock.patch.dict(os.environ, {"RAY_TMPDIR": folder}):
            cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
            try:
                node = cluster.add_node(num_cpus=1)
                cluster.wait_for_nodes()
                start_ray(address=cluster.address)
                yield cluster, node
            finally:
                ray.shutdown()
                cluster.shutdown()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if restart:
            start_ray(num_cpus=4)


@ray.remote(num_cpus=0)
class Here:
    """An actor that asks for no resources, as episode actors and routers do."""

    def node(self) -> str:
        return ray.get_runtime_context().get_node_id()


def test_actors_that_ask_for_nothing_run_on_the_drivers_node(two_nodes: tuple[Any, Any]) -> None:
    # Without the affinity (or with a soft one), Ray puts each on a random node: all four stay
    # here one time in sixteen.
    actors = [Here.options(scheduling_strategy=on_this_node()).remote() for _ in range(4)]
    assert set(ray.get([a.node.remote() for a in actors])) == {ray.get_runtime_context().get_node_id()}


def test_a_killed_node_takes_only_its_replica_and_the_router_moves_its_conversation(
        two_nodes: tuple[Any, Any]) -> None:
    cluster, node = two_nodes
    spec = ReplicaSimSpec(replicas=2, num_cpus=0.01, startup_timeout_s=60,
                          replica=ReplicaSettings(block_tokens=4, cache_tokens=4096, max_model_len=4096, time_scale=0.001))
    with make_deployment(spec) as deployment:
        on_node = descendants(raylet(node))
        servers = {d["url"]: d["server_pid"] in on_node for d in ray.get([r.describe.remote() for r in deployment.replicas])}
        assert sorted(servers.values()) == [False, True]  # one replica on each node
        assert actor_processes("Router", raylet(node)) == []
        doomed = next(url for url, there in servers.items() if there)

        async def calls() -> list[str | None]:
            policies = [deployment.policy(f"episode-{i}") for i in range(2)]  # least loaded: one per replica
            first = [(await p.complete([ChatMessage(role="user", content="one")])).served_by for p in policies]
            kill_node(cluster, node)
            victim = policies[first.index(doomed)]
            after = (await victim.complete([ChatMessage(role="user", content="two")])).served_by
            return [*first, after]

        served = asyncio.run(calls())
        assert set(served[:2]) == set(servers) and served[2] != doomed
        assert ray.get(deployment.router.snapshot.remote())["dead"] == [doomed]
