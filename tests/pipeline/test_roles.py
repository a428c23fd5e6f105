"""Roles resolved per episode: what the agent's context window leaves for a prompt."""

from __future__ import annotations

import pytest

from pipeline.llm import make_deployment
from pipeline.roles import EpisodeModels
from pipeline.sweep import expand
from tests.pipeline.test_sweep import job


@pytest.mark.parametrize(("spec", "max_tokens", "expected"), [
    ({"kind": "llamacpp", "n_ctx": 8192}, 192, 8000),
    ({"kind": "vllm", "model": "m", "engine_args": {"max_model_len": 65536}}, 32768, 32768),
    ({"kind": "vllm", "model": "m"}, 32768, None),  # the model's own length: only the server knows it
    ({"kind": "endpoint", "base_url": "http://127.0.0.1:1/v1", "model": "m"}, 512, None),
    ({"kind": "endpoint", "base_url": "http://127.0.0.1:1/v1", "model": "m", "context_length": 4096}, 512, 3584),
    ({"kind": "llamacpp", "n_ctx": 1024}, 4096, 0),  # a completion budget beyond the window leaves nothing
])
def test_the_agents_prompt_budget_is_its_context_length_minus_the_completion_budget(spec, max_tokens, expected):
    sweep = expand(job(agents=[{"deployment": "model", "sampling": {"max_tokens": max_tokens}}],
                       deployments={"model": spec}))
    models = EpisodeModels({"model": make_deployment(sweep.job.deployments["model"])})
    assert models.agent_prompt_tokens(sweep.episodes[0]) == expected
