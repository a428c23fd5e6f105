"""Deployment kinds by name: each registers its spec model with the class that runs it.

A new kind is one module: a spec (``kind: Literal["my_kind"]``, its settings, :meth:`identity`), a
:class:`~pipeline.llm.deployments.deployment.Deployment` subclass (start, policy, optionally
embedder, describe, stop) and a call to :func:`register_deployment_kind`; ``deployments:`` in a job
file then accepts ``{kind: my_kind, ...}``.
"""

from __future__ import annotations

from typing import Annotated

from flowstate.registry import Registry
from pipeline.llm.deployments.deployment import Deployment
from pipeline.llm.deployments.specs import DeploymentSpecBase

DEPLOYMENT_KINDS: Registry[type[Deployment]] = Registry("deployment kind", "kind")

#: A job's deployment entry: the union of the registered kinds' specs.
DeploymentSpec = Annotated[DeploymentSpecBase, DEPLOYMENT_KINDS.union()]


def register_deployment_kind(spec: type[DeploymentSpecBase], deployment: type[Deployment]) -> None:
    DEPLOYMENT_KINDS.register(spec.model_fields["kind"].default, deployment, spec)


def make_deployment(spec: DeploymentSpecBase) -> Deployment:
    return DEPLOYMENT_KINDS.get(spec.kind)(spec)
