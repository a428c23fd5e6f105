"""Running deployments: started once per sweep, then asked for one policy per conversation.

A ``Deployment`` holds only specs and Ray actor handles, so it pickles: the driver starts it and
passes it to episode actors, which call :meth:`Deployment.policy` in their own process.
"""

from __future__ import annotations

import abc
import uuid
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayError, RayTaskError

from flowstate.chat import Embedder, Policy
from pipeline.llm.client import ChatClient, EmbeddingClient
from pipeline.llm.deployments.replica import ServerReplica
from pipeline.llm.deployments.servers import replica_options, server_kind
from pipeline.llm.deployments.specs import DeploymentSpecBase, ReplicatedSpec
from pipeline.llm.errors import DeploymentStartError
from pipeline.llm.placement import on_this_node
from pipeline.llm.router import Router, RouterEndpoints
from pipeline.llm.settings import SamplingParams


class Deployment(abc.ABC):
    """A running model service of one kind; subclasses take their kind's spec."""

    spec: DeploymentSpecBase

    def __init__(self, spec: DeploymentSpecBase) -> None:
        self.spec = spec

    @abc.abstractmethod
    def start(self) -> list[str]:
        """Bring the model up (once per sweep); return the base URLs that serve it."""

    @abc.abstractmethod
    def policy(self, session_id: str, role: str = "agent", sampling: SamplingParams | None = None,
               context: Any = None) -> Policy:
        """The policy of one conversation: ``role`` (agent / user / judge) is part of its identity,
        so an episode's agent and user simulator keep separate prefix caches. ``sampling``
        replaces the spec's for this conversation (each model use samples its own way).
        ``context`` reaches scripted fixtures only (servers ignore it).

        HTTP policies are ChatClients: ``await policy.aclose()`` when the episode ends
        frees its routing slot, so new conversations see the true load."""

    def embedder(self, session_id: str, role: str = "embeddings") -> Embedder:
        """The embeddings client of one conversation (``/v1/embeddings``), for kinds that serve them."""
        raise NotImplementedError(f"a {self.spec.kind} deployment does not serve embeddings")

    @abc.abstractmethod
    def describe(self) -> dict[str, Any]:
        """Engine, version, model, command line, replicas: what tracking records."""

    def stop(self) -> None:
        """Release everything :meth:`start` made (idempotent)."""

    def __enter__(self) -> Deployment:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ReplicatedDeployment(Deployment):
    """Servers of a registered server kind in ``ServerReplica`` actors behind one ``Router`` actor."""

    spec: ReplicatedSpec

    def __init__(self, spec: ReplicatedSpec) -> None:
        super().__init__(spec)
        self.replicas: list[Any] = []
        self.router: Any = None
        self.urls: list[str] = []
        self._described: list[dict[str, Any]] = []
        self._limit_key = uuid.uuid4().hex  # one in-flight semaphore per process for this deployment

    def start(self) -> list[str]:
        if self.urls:
            return self.urls
        options = replica_options(self.spec)
        self.replicas = [ServerReplica.options(**options).remote(self.spec, index) for index in range(self.spec.replicas)]
        starts = [replica.start.remote() for replica in self.replicas]
        # Beside the driver: a router on another node would die with that node, and every
        # conversation of the deployment with it.
        self.router = Router.options(scheduling_strategy=on_this_node()).remote(
            server_kind(self.spec).liveness_path, *starts, rebalance_margin=self.spec.rebalance_margin,
            routing=self.spec.routing, seed=self.spec.router_seed)
        try:
            # The replica's own start waits startup_timeout_s for its server; a longer wait means
            # Ray could not place it (a cluster without the resources it asks for).
            ready, pending = ray.wait(starts, num_returns=len(starts), timeout=self.spec.startup_timeout_s
                                      + _PLACEMENT_GRACE_S, fetch_local=False)
            ray.get(ready)  # a replica that failed to start says why, before any that could not be placed
            if pending:
                raise GetTimeoutError("not placed")
            self.urls = ray.get(starts)
            self._described = ray.get([replica.describe.remote() for replica in self.replicas])
            ray.get(self.router.snapshot.remote())  # ready means routable too
        except GetTimeoutError:
            self.stop(graceful=False)  # a replica never placed would never answer a stop
            wanted = {k: v for k, v in options.items() if k.startswith("num_")}
            raise DeploymentStartError(
                f"{self.spec.kind} deployment did not start within {self.spec.startup_timeout_s + _PLACEMENT_GRACE_S:.0f} s: "
                f"each of its {self.spec.replicas} replicas asks Ray for {wanted}; the cluster has "
                f"{_cpus_gpus(ray.cluster_resources())} in all and {_cpus_gpus(ray.available_resources())} free "
                "(lower num_cpus, or start fewer replicas)") from None
        except RayTaskError as exc:
            self.stop()
            cause = exc.cause if isinstance(exc.cause, DeploymentStartError) else exc
            raise DeploymentStartError(f"{self.spec.kind} deployment failed to start: {cause}") from exc
        except BaseException:
            self.stop()
            raise
        return self.urls

    def policy(self, session_id: str, role: str = "agent", sampling: SamplingParams | None = None,
               context: Any = None) -> Policy:
        if not self.urls:
            raise RuntimeError("start() the deployment before asking for policies")
        if self.spec.embedding:
            raise NotImplementedError(f"this {self.spec.kind} deployment serves embeddings, not chat")
        conversation = f"{session_id}/{role}"
        return ChatClient(RouterEndpoints(self.router, conversation), self.spec.served_model(),
                          profile=self.spec.profile(), sampling=sampling or self.spec.sampling,
                          settings=self.spec.client, limit_key=self._limit_key, conversation=conversation,
                          tokens=self.spec.token_source())

    def embedder(self, session_id: str, role: str = "embeddings") -> Embedder:
        if not self.urls:
            raise RuntimeError("start() the deployment before asking for embedders")
        if not self.spec.embedding:
            raise NotImplementedError(f"this {self.spec.kind} deployment serves chat: set embedding: true for embeddings")
        conversation = f"{session_id}/{role}"
        return EmbeddingClient(RouterEndpoints(self.router, conversation), self.spec.served_model(),
                               settings=self.spec.client, limit_key=self._limit_key, conversation=conversation)

    def describe(self) -> dict[str, Any]:
        first = self._described[0] if self._described else {}
        return {"kind": self.spec.kind, "engine": self.spec.engine_name(),
                "engine_distribution": first.get("engine_distribution"),
                "engine_version": first.get("engine_version"), "model": self.spec.served_model(),
                "command": first.get("argv"), "replicas": self.spec.replicas,
                "environment": [d.get("environment") for d in self._described],
                "urls": list(self.urls), "startup_s": [d.get("startup_s") for d in self._described]}

    def stop(self, graceful: bool = True) -> None:
        """Stop the servers (``graceful``: let each replica stop its server first), then the actors."""
        for replica in self.replicas:
            if graceful:
                try:
                    ray.get(replica.stop.remote(), timeout=_STOP_TIMEOUT_S)
                except RayError:
                    pass  # dead, broken or slow: killing the actor makes its supervisor take the server down
            ray.kill(replica)
        if self.router is not None:
            ray.kill(self.router)
        self.replicas, self.router, self.urls = [], None, []


_PLACEMENT_GRACE_S = 30.0
_STOP_TIMEOUT_S = 30.0  # a replica gives its server 20 s to exit before killing it


def _cpus_gpus(resources: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in resources.items() if k in ("CPU", "GPU")}
