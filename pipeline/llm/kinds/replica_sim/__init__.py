"""``kind: replica_sim``: simulated GPU replicas behind the real router, for planning at cluster scale.

Each replica is the stand-in server (:mod:`.server`) in replica mode, whose simulated engine
(:mod:`.engine`) takes the time a GPU would, in its own process, run by a ``ServerReplica`` actor
behind the deployment's ``Router``, as vLLM replicas are; the client gets cached tokens in vLLM's
shape and exact token ids from the replica's vLLM-like ``/tokenize``, so a sweep records cached
tokens, reusable prefixes and physical limits as it would on vLLM.

What the agent says is a TEST FIXTURE's: with ``script: oracle`` (any name ``kind: scripted``
takes), the episode's scripted policy writes each output in the episode actor and sends it with
the call, and the replica generates it (its time, its cache). The script's state stays with the
episode, so a conversation may move between replicas, as least-loaded routing moves it. Without a
script the replicas echo the prompt.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from flowstate.chat import ChatMessage, Completion, Policy, SamplingOverride
from pipeline.llm.client import ChatClient
from pipeline.llm.deployments import ReplicatedDeployment, ReplicatedSpec, ServerKind, register_deployment_kind
from pipeline.llm.engines import EngineProfile
from pipeline.llm.kinds.replica_sim.engine import ReplicaSettings
from pipeline.llm.kinds.replica_sim.server import FIXTURE_OUTPUT
from pipeline.llm.scripted_policies import SCRIPTED_POLICIES
from pipeline.llm.settings import SamplingParams
from pipeline.llm.token_ids import TokenizeEndpoint, TokenSource


class ReplicaSimSpec(ReplicatedSpec):
    """``{kind: replica_sim, replicas: 4, routing: sticky, replica: {time_scale: 4}, script: oracle}``."""

    kind: Literal["replica_sim"] = "replica_sim"
    replica: ReplicaSettings = ReplicaSettings()
    # TEST FIXTURE: the scripted policy that writes the agent's outputs (None: the replicas echo).
    script: str | None = None
    model: str = "replica-sim"
    # Where each replica writes its engine's figures (``GET /sim/stats``) as JSON when it stops.
    stats_dir: Path | None = None
    check_schema_enforcement: bool = False  # a stand-in enforces no schema
    # Ray CPUs reserved per replica: none, as the stand-in stands for a GPU elsewhere. Ray places an
    # actor that asks for nothing on a random node, SPREAD or not: to spread replicas over a
    # cluster's nodes, ask for a little (0.01).
    num_cpus: float = Field(default=0.0, ge=0)

    def identity(self) -> dict[str, Any]:
        """What writes the outputs decides them; the engine's settings only decide when they come."""
        return {"kind": self.kind, "script": self.script}

    def served_model(self) -> str:
        return self.model

    def token_source(self) -> TokenSource | None:
        """The replica's vLLM-like ``/tokenize``."""
        return TokenizeEndpoint(self.served_model())


class ScriptedOutputs:
    """TEST FIXTURE: a conversation whose outputs a scripted policy writes and a replica generates."""

    def __init__(self, client: ChatClient, script: Policy) -> None:
        self.client = client
        self.script = script

    async def complete(self, messages: Sequence[ChatMessage], *, json_schema: Any = None) -> Completion:
        text = (await self.script.complete(messages, json_schema=json_schema)).text
        call = copy.copy(self.client)  # the same conversation (routing, ledger), this output in the body
        call.sampling = self.client.sampling.model_copy(
            update={"extra_body": {**self.client.sampling.extra_body, FIXTURE_OUTPUT: text}})
        return await call.complete(messages, json_schema=json_schema)

    def with_sampling(self, override: SamplingOverride) -> ScriptedOutputs:
        return ScriptedOutputs(self.client.with_sampling(override), self.script)

    async def aclose(self) -> None:
        await self.client.aclose()


class ReplicaSimDeployment(ReplicatedDeployment):
    spec: ReplicaSimSpec

    def start(self) -> list[str]:
        if self.spec.script is not None:
            SCRIPTED_POLICIES.get(self.spec.script)  # fail at start, not at the first episode
        return super().start()

    def policy(self, session_id: str, role: str = "agent", sampling: SamplingParams | None = None,
               context: Any = None) -> Policy:
        """The agent's conversations follow the script; other roles (and all, without one) get echoes."""
        client = super().policy(session_id, role, sampling, context)
        if self.spec.script is None or role != "agent":
            return client
        assert isinstance(client, ChatClient)
        return ScriptedOutputs(client, SCRIPTED_POLICIES.get(self.spec.script)(session_id, role, context))


def server_command(spec: ReplicaSimSpec, host: str, port: int, python: str = sys.executable) -> list[str]:
    stats = ["--stats-out", str(spec.stats_dir / f"replica-{host}-{port}.json")] if spec.stats_dir is not None else []
    return [python, "-m", "pipeline.llm.kinds.replica_sim.server", "--host", host, "--port", str(port), "--model", spec.model,
            "--replica", spec.replica.model_dump_json(), "--fixture-outputs", *stats]


# Answers like vLLM (cached tokens in usage, /tokenize), but takes nothing beyond the OpenAI API.
register_deployment_kind(ReplicaSimSpec, ReplicaSimDeployment, EngineProfile(name="replica_sim"),
                         ServerKind(server_command, lambda spec: {"num_cpus": spec.num_cpus}, "/v1/models", ("flowstate",)))

__all__ = ["ReplicaSimDeployment", "ReplicaSimSpec", "ScriptedOutputs"]
