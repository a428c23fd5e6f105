"""What a cell costs on the accelerator: a GPU-time estimate from its uncached prompt and completion tokens.

estimate = uncached prompt tokens × prefill seconds per token + completion tokens × decode seconds
per token (``sql/tokens.sql`` gives the tokens; uncached = prompt minus what the engine reported
cached, else minus the exact reusable prefix). The cost model is the job's ``analysis.cost_model``
(never part of an id); without one, cells served by llama.cpp, and model-free cells whose tokens were
counted with SmolLM2's tokenizer, get the figures measured here for SmolLM2-135M on llama.cpp (2-core
VM, ``perf/llm_llamacpp_throughput.py``), and other cells none (a vLLM user states them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class CostModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    prefill_s_per_token: float = Field(gt=0)
    decode_s_per_token: float = Field(gt=0)
    source: str = "analysis.cost_model"

    def seconds(self, uncached_prompt_tokens: int | None, completion_tokens: int | None) -> float | None:
        if uncached_prompt_tokens is None and completion_tokens is None:
            return None
        return (uncached_prompt_tokens or 0) * self.prefill_s_per_token + (completion_tokens or 0) * self.decode_s_per_token


# SmolLM2-135M-Instruct Q4_1 on llama.cpp, 2 threads of the 2-core VM: prefill 148 tokens/s,
# generation 54 tokens/s (perf/llm_llamacpp_throughput.py; README, Figures).
LLAMACPP_MEASURED = CostModel(prefill_s_per_token=1 / 148, decode_s_per_token=1 / 54,
                              source="llama.cpp defaults measured for SmolLM2-135M on a 2-core VM "
                                     "(prefill 148, decode 54 tokens/s)")


def cost_models(job: Mapping[str, Any]) -> dict[str, CostModel]:
    """The cost model of each agent model (by its label) of a resolved job (a manifest's ``job``)."""
    analysis = job.get("analysis") or {}
    stated = analysis.get("cost_model")
    if stated:
        model = CostModel.model_validate(stated)
        return {a.get("label") or a["deployment"]: model for a in job.get("agents") or []}
    found = {}
    for agent in job.get("agents") or []:
        kind = (job.get("deployments") or {}).get(agent["deployment"], {}).get("kind")
        counted = kind == "scripted" and analysis.get("count_tokens") == "smollm2"
        if kind == "llamacpp" or counted:
            found[agent.get("label") or agent["deployment"]] = LLAMACPP_MEASURED
    return found


def with_gpu_seconds(tokens: Iterable[Mapping[str, Any]], models: Mapping[str, CostModel]) -> list[dict[str, Any]]:
    """``sql/tokens.sql`` rows with ``gpu_s`` (the cell's estimate), ``gpu_s_per_episode`` and the
    cost model's ``cost_source`` (None where the cell's model has none)."""
    out = []
    for row in tokens:
        model = models.get(row["model"])
        seconds = model.seconds(row.get("uncached_prompt_tokens"), row.get("completion_tokens")) if model else None
        out.append({**row, "gpu_s": seconds, "gpu_s_per_episode": seconds / row["episodes"] if seconds is not None
                    and row.get("episodes") else None, "cost_source": model.source if model else None})
    return out
