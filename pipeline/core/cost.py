"""What a cell costs on the accelerator: a GPU-time estimate from its uncached prompt and completion tokens.

estimate = uncached prompt tokens × prefill seconds per token + completion tokens × decode seconds
per token (``sql/tokens.sql`` gives the tokens; uncached = prompt minus what the engine reported
cached, else minus the exact reusable prefix). The cost model is the job's ``analysis.cost_model``
(never part of an id); without one, each agent model's default as the run recorded it in the
manifest (``cost_models``): the figures its deployment's kind measured (llama.cpp's, for SmolLM2-135M
on a 2-core VM), or, for model-free cells whose tokens were counted, those of the counting tokenizer's
model; other cells get none (a vLLM user states them).
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


def cost_models(manifest: Mapping[str, Any]) -> dict[str, CostModel]:
    """The cost model of each agent model (by its label) of a sweep, from its manifest: the job's
    stated one for every agent, else the defaults the run recorded."""
    job = manifest.get("job") or {}
    stated = (job.get("analysis") or {}).get("cost_model")
    if stated:
        model = CostModel.model_validate(stated)
        return {a.get("label") or a["deployment"]: model for a in job.get("agents") or []}
    return {label: CostModel.model_validate(model) for label, model in (manifest.get("cost_models") or {}).items()}


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
