"""``kind: scripted``: a scripted policy registered by name (a deterministic TEST FIXTURE) as the model.

Its calls report no usage: a job that names a tokenizer (``analysis.count_tokens``) gets them counted.
"""

from __future__ import annotations

from typing import Any, Literal

from flowstate.chat import Policy
from pipeline.llm.deployments import Deployment, DeploymentSpecBase, register_deployment_kind
from pipeline.llm.engines import EngineProfile
from pipeline.llm.scripted_policies import SCRIPTED_POLICIES
from pipeline.llm.settings import SamplingParams


class ScriptedSpec(DeploymentSpecBase):
    """An in-process policy registered by name (deterministic test fixtures)."""

    kind: Literal["scripted"] = "scripted"
    name: str

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name}


class ScriptedDeployment(Deployment):
    spec: ScriptedSpec

    def start(self) -> list[str]:
        SCRIPTED_POLICIES.get(self.spec.name)  # fail at start, not at the first episode
        return []

    def policy(self, session_id: str, role: str = "agent", sampling: SamplingParams | None = None,
               context: Any = None) -> Policy:
        """Scripted policies are deterministic: ``sampling`` does not apply."""
        return SCRIPTED_POLICIES.get(self.spec.name)(session_id, role, context)

    def describe(self) -> dict[str, Any]:
        return {"kind": "scripted", "engine": self.spec.engine_name(), "engine_version": None,
                "model": self.spec.name, "replicas": 0}


register_deployment_kind(ScriptedSpec, ScriptedDeployment, EngineProfile(name="scripted", reports_usage=False))

__all__ = ["ScriptedDeployment", "ScriptedSpec"]
