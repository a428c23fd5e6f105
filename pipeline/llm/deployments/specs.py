"""What a job says about its model: the bases of every deployment kind's spec, discriminated on ``kind``.

Each kind (a folder under :mod:`pipeline.llm.kinds`) subclasses one of them and registers it with
the deployment class that runs it (:func:`pipeline.llm.deployments.registry.register_deployment_kind`);
``DeploymentSpec`` is the union of the registered specs.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from pipeline.core.cost import CostModel
from pipeline.llm.engines import ENGINE_PROFILES, EngineProfile
from pipeline.llm.router import Routing
from pipeline.llm.settings import ClientSettings, SamplingParams
from pipeline.llm.token_ids import TokenSource


class DeploymentSpecBase(BaseModel):
    """Every kind's spec: ``kind: Literal[...]`` and what identifies the model's behaviour."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    # Fields that say where the deployment runs, never what it computes: left out of the sweep id too.
    placement_fields: ClassVar[frozenset[str]] = frozenset()

    def identity(self) -> dict[str, Any]:
        """What identifies the deployment's outputs (part of episode ids): engine, model and what
        shapes its outputs, never replicas, hosts, URLs or timeouts."""
        raise NotImplementedError

    def context_tokens(self) -> int | None:
        """The model's context length where the spec states it (prompt plus completion)."""
        return None

    def engine_name(self) -> str:
        """The engine that serves it, as deployments describe it and manifests record it: the kind's own."""
        return self.kind

    def profile(self) -> EngineProfile:
        """Its engine's capabilities (registered with the kind: :mod:`pipeline.llm.engines`)."""
        return ENGINE_PROFILES.get(self.engine_name())

    def cost_model(self) -> CostModel | None:
        """The accelerator time its calls cost, where the kind measured it (the report's estimate)."""
        return None


class ServedSpec(DeploymentSpecBase):
    """A deployment reached over HTTP: how its clients sample and retry."""

    sampling: SamplingParams = SamplingParams()
    client: ClientSettings = ClientSettings()
    # Check at start-up that the server enforces JSON schemas (when a cell uses the JSON protocol).
    # Turn off only for stand-ins that cannot enforce anything.
    check_schema_enforcement: bool = True

    def token_source(self) -> TokenSource | None:
        """Where exact prefix accounting gets the engine's token ids (None: the figures stay null)."""
        return None


class ReplicatedSpec(ServedSpec):
    """Servers started by the sweep, one Ray actor per replica (each kind registers how to run
    one: :class:`pipeline.llm.deployments.servers.ServerKind`)."""

    replicas: int = Field(default=1, ge=1)
    # "127.0.0.1" (one machine), or "node": bind to the Ray node's IP so other nodes can reach it.
    host: str = "127.0.0.1"
    startup_timeout_s: float = Field(default=120.0, gt=0)
    # Move a conversation off its replica when that one has more than this many conversations
    # above the least-loaded replica (None: always sticky). See pipeline.llm.router.
    rebalance_margin: int | None = Field(default=None, ge=0)
    # "least_loaded": every call goes to the replica with the fewest conversations, wherever the
    # conversation was before (no affinity: to measure what stickiness is worth). Dumped only when set.
    routing: Routing = Field(default="sticky", exclude_if=lambda v: v == "sticky")
    # Seeds the router's random tie-breaks (None: fresh each sweep); dumped only when set.
    router_seed: int | None = Field(default=None, exclude_if=lambda v: v is None)
    # Serve /v1/embeddings instead of chat (each kind passes it to its server); dumped only when set.
    embedding: bool = Field(default=False, exclude_if=lambda v: v is False)

    def served_model(self) -> str:
        """The model name its server answers to."""
        raise NotImplementedError
