"""Which policy serves each caller of an episode (agent, user simulator, judge).

Deployments are started once by the driver and passed to the actors; this module turns a job's
model uses into per-episode policies. The episode travels as the policy's context, for scripted
test fixtures that need it (the oracle needs its task).
"""

from __future__ import annotations

from collections.abc import Mapping

import pipeline.fixtures  # noqa: F401 - registers the scripted fixtures in this process
from flowstate import Policy
from pipeline.config import JobConfig, ModelUse, Sampling
from pipeline.llm import SamplingParams
from pipeline.llm.deployments import Deployment
from pipeline.sweep import EpisodeSpec


def sampling_params(sampling: Sampling, engine: str, seed: int | None) -> SamplingParams:
    """The job's sampling as request parameters; thinking is switched per engine (vLLM's template kwarg)."""
    extra = {"chat_template_kwargs": {"enable_thinking": sampling.enable_thinking}} if engine == "vllm" else {}
    return SamplingParams(temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_tokens,
                          seed=seed, extra_body=extra)


class EpisodeModels:
    """Resolves the three callers of one episode to policies."""

    def __init__(self, job: JobConfig, deployments: Mapping[str, Deployment]) -> None:
        self.job = job
        self.deployments = deployments

    def policy(self, use: ModelUse | str, caller: str, spec: EpisodeSpec) -> Policy | None:
        """``None`` for the in-process scripted user and for "no judge"."""
        if isinstance(use, str):
            return None
        deployment = self.deployments[use.deployment]
        engine = deployment.describe()["engine"]
        return deployment.policy(spec.episode_id, caller, sampling_params(use.sampling, engine, spec.seed),
                                 context=spec)

    def agent(self, spec: EpisodeSpec) -> Policy:
        policy = self.policy(spec.cell.agent, "agent", spec)
        assert policy is not None
        return policy


async def aclose_policy(policy: object) -> None:
    """Close an HTTP policy's conversation (frees its routing slot); fixtures have nothing to close."""
    close = getattr(policy, "aclose", None)
    if close is not None:
        await close()
