"""Roles resolved per episode: what the agent's context window leaves for a prompt."""

from __future__ import annotations

import pytest

from pipeline.config.sweep import expand
from pipeline.llm import make_deployment
from pipeline.run.models import EpisodeModels
from tests.pipeline.config.test_sweep import job


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


def test_sampling_beyond_openai_is_sent_in_each_engines_own_names_and_only_when_set() -> None:
    from pipeline.core.specs import Sampling
    from pipeline.llm import ENGINE_PROFILES
    from pipeline.run.models import sampling_params

    def extra(sampling: Sampling, engine: str) -> dict[str, object]:
        return sampling_params(sampling, ENGINE_PROFILES.get(engine), 3).extra_body

    plain = Sampling(temperature=0.1, max_tokens=64)
    assert extra(plain, "llamacpp") == {}
    assert extra(plain, "vllm") == {"chat_template_kwargs": {"enable_thinking": False}}
    assert "top_k" not in plain.model_dump()  # unset: no part of any id
    like_llamacpp = Sampling(temperature=0.1, max_tokens=64, top_k=40, min_p=0.05, repetition_penalty=1.1)
    assert extra(like_llamacpp, "vllm") == {
        "chat_template_kwargs": {"enable_thinking": False}, "top_k": 40, "min_p": 0.05, "repetition_penalty": 1.1}
    assert extra(like_llamacpp, "llamacpp") == {"top_k": 40, "min_p": 0.05, "repeat_penalty": 1.1}
    penalised = Sampling(temperature=0.1, max_tokens=64, top_k=40, frequency_penalty=0.5)
    assert extra(penalised, "openai") == {"frequency_penalty": 0.5}  # OpenAI's own: sent everywhere
    assert extra(penalised, "scripted") == {"frequency_penalty": 0.5}  # a kind's profile that says nothing more
    assert extra(penalised, "vllm")["frequency_penalty"] == 0.5
    assert penalised.model_dump()["frequency_penalty"] == 0.5 and "min_p" not in penalised.model_dump()


def test_sampling_beyond_openai_is_refused_for_an_openai_endpoint() -> None:
    from pipeline.config.yaml_loader import ConfigError

    endpoint = {"kind": "endpoint", "base_url": "https://api.example.com/v1", "model": "m", "engine": "openai"}
    with pytest.raises((ConfigError, ValueError), match="top_k: not taken by engine 'openai'"):
        job(agents=[{"deployment": "model", "sampling": {"top_k": 40}}], deployments={"model": endpoint})
    job(agents=[{"deployment": "model", "sampling": {"frequency_penalty": 0.5}}], deployments={"model": endpoint})
