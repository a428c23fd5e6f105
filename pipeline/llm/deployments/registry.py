"""Deployment kinds by name: each registers, once, its spec, the class that runs it, its engine's
profile and, for kinds whose replicas are server processes, how to run one.

A new kind is one folder under :mod:`pipeline.llm.kinds`: a spec (``kind: Literal["my_kind"]``, its
settings, :meth:`identity`), a :class:`~pipeline.llm.deployments.deployment.Deployment` subclass
(start, policy, optionally embedder, describe, stop), an
:class:`~pipeline.llm.engines.EngineProfile` and a call to :func:`register_deployment_kind` when the
folder is imported; an entry point in the group ``flowstate.plugins`` (or a job's ``plugins:``) names
the folder, and ``deployments:`` in a job file then accepts ``{kind: my_kind, ...}``.
"""

from __future__ import annotations

from typing import Annotated

from flowstate.registry import Registry
from pipeline.llm.deployments.deployment import Deployment
from pipeline.llm.deployments.servers import SERVER_KINDS, ServerKind
from pipeline.llm.deployments.specs import DeploymentSpecBase
from pipeline.llm.engines import ENGINE_PROFILES, EngineProfile

DEPLOYMENT_KINDS: Registry[type[Deployment]] = Registry("deployment kind", "kind")

#: A job's deployment entry: the union of the registered kinds' specs.
DeploymentSpec = Annotated[DeploymentSpecBase, DEPLOYMENT_KINDS.union()]


def register_deployment_kind(spec: type[DeploymentSpecBase], deployment: type[Deployment], profile: EngineProfile,
                             server: ServerKind | None = None) -> None:
    """Add the kind that ``spec``'s ``kind`` names; ``profile`` is its engine's, ``server`` how a
    replica runs (for a :class:`~pipeline.llm.deployments.deployment.ReplicatedDeployment`)."""
    kind = spec.model_fields["kind"].default
    ENGINE_PROFILES.register(profile.name, profile)
    if server is not None:
        SERVER_KINDS.register(kind, server)
    DEPLOYMENT_KINDS.register(kind, deployment, spec)


def make_deployment(spec: DeploymentSpecBase) -> Deployment:
    return DEPLOYMENT_KINDS.get(spec.kind)(spec)
