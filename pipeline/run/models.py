"""Which model serves each role of an episode: agent, memory, user simulator, judge, tool model, embeddings.

Deployments are started once by the driver and passed to the actors; this module turns a job's
model uses into per-episode callers, each its own conversation (``<episode>/<role>``, so roles keep
separate prefix caches). The episode travels as the policy's context, for scripted test fixtures
that need it (the oracle needs its task). Unset roles fall back to the cell's agent model: the
paper runs every method's memory on the agent's model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flowstate import Embedder, Policy
from pipeline.config.job import JobConfig
from pipeline.core.cost import CostModel
from pipeline.core.roles import ROLES, Role
from pipeline.core.specs import EpisodeSpec, ModelUse, Sampling
from pipeline.llm import EngineProfile, SamplingParams
from pipeline.llm.counting import CountingPolicy, chat_tokenizer, tokenizer_source
from pipeline.llm.deployments import Deployment


def sampling_params(sampling: Sampling, engine: EngineProfile, seed: int | None) -> SamplingParams:
    """The job's sampling as request parameters, in the engine's names; the thinking switch where it
    takes one."""
    extra: dict[str, Any] = {"chat_template_kwargs": {"enable_thinking": sampling.enable_thinking}
                             } if engine.thinking_switch else {}
    for setting, name in engine.sampling_names.items():
        if getattr(sampling, setting) is not None:
            extra[name] = getattr(sampling, setting)
    return SamplingParams(temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_tokens,
                          seed=seed, extra_body=extra)


class EpisodeModels:
    """Resolves the roles of one episode to callers."""

    def __init__(self, deployments: Mapping[str, Deployment], *, count_tokens: str | None = None) -> None:
        self.deployments = deployments
        self.count_tokens = count_tokens  # the tokenizer counting scripted fixtures' tokens (analysis)

    def use(self, spec: EpisodeSpec, role: Role) -> ModelUse | str:
        """The job's setting for a role of this episode ("scripted"/"none" for fixtures and absent roles)."""
        if role == "agent":
            return spec.cell.agent
        if role in ("user_simulator", "judge"):
            return getattr(spec, role)
        if role in ("memory", "tool_model"):
            return getattr(spec, role) or spec.cell.agent
        raise ValueError(f"role {role!r} is not a chat model")

    def deployment_names(self, spec: EpisodeSpec) -> dict[Role, str]:
        """The job's deployment serving each role of this episode that a deployment serves."""
        names: dict[Role, str] = {}
        for role in ROLES:
            use = spec.embeddings if role == "embeddings" else self.use(spec, role)
            if use is not None and not isinstance(use, str):
                names[role] = use.deployment
        return names

    def policy(self, spec: EpisodeSpec, role: Role) -> Policy | None:
        """``None`` for a scripted fixture of the benchmark's own and for an absent role."""
        use = self.use(spec, role)
        if isinstance(use, str):
            return None
        deployment = self.deployments[use.deployment]
        engine = deployment.spec.profile()
        policy = deployment.policy(spec.episode_id, role, sampling_params(use.sampling, engine, spec.seed), context=spec)
        if self.count_tokens and not engine.reports_usage:
            policy = CountingPolicy(policy, chat_tokenizer(self.count_tokens))
        return policy

    def agent_prompt_tokens(self, spec: EpisodeSpec) -> int | None:
        """What the agent's context window leaves for a prompt, where its deployment states a length."""
        context = self.deployments[spec.cell.agent.deployment].spec.context_tokens()
        return None if context is None else max(0, context - spec.cell.agent.sampling.max_tokens)

    def embedder(self, spec: EpisodeSpec) -> Embedder | None:
        if spec.embeddings is None:
            return None
        return self.deployments[spec.embeddings.deployment].embedder(spec.episode_id, "embeddings")


def agent_cost_models(job: JobConfig) -> dict[str, CostModel]:
    """The cost model of each agent model (by its label) whose deployment's kind measured one, or,
    for calls no server counts, whose counting tokenizer has one (the manifest records them, so that
    readers need no plug-in)."""
    found = {}
    for agent in job.agents:
        spec = job.deployments[agent.deployment]
        model = spec.cost_model()
        if model is None and job.analysis.count_tokens and not spec.profile().reports_usage:
            model = tokenizer_source(job.analysis.count_tokens).cost_model
        if model is not None:
            found[agent.name] = model
    return found
