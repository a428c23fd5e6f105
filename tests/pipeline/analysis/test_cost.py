"""The GPU-time estimate: which cost model a cell gets, and the arithmetic on sql/tokens.sql's rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from pipeline.core.cost import CostModel, cost_models, with_gpu_seconds
from pipeline.llm.kinds.llamacpp.spec import SMOLLM2_MEASURED
from pipeline.run.models import agent_cost_models
from pipeline.store.manifest import MANIFEST, ManifestError, read_manifest
from tests.pipeline.config.test_sweep import job

AGENTS = [{"deployment": "small", "label": "smollm2"}, {"deployment": "big"}, {"deployment": "oracle"}]
DEPLOYMENTS = {"small": {"kind": "llamacpp"}, "big": {"kind": "vllm", "model": "m"},
               "oracle": {"kind": "scripted", "name": "oracle"}}


def manifest(analysis: dict[str, Any]) -> dict[str, Any]:
    """What a run records: the job, and each agent's default cost model as its deployment's kind declares it."""
    config = job(agents=AGENTS, deployments=DEPLOYMENTS, analysis=analysis)
    return {"job": config.model_dump(mode="json"),
            "cost_models": {label: model.model_dump(mode="json") for label, model in agent_cost_models(config).items()}}


def test_llamacpp_and_counted_cells_get_the_measured_defaults_and_vllm_none() -> None:
    assert cost_models(manifest({})) == {"smollm2": SMOLLM2_MEASURED}
    # a scripted fixture's calls counted with SmolLM2's tokenizer cost what SmolLM2's do; another tokenizer's, nothing known
    assert cost_models(manifest({"count_tokens": "smollm2"})) == {"smollm2": SMOLLM2_MEASURED, "oracle": SMOLLM2_MEASURED}
    assert cost_models(manifest({"count_tokens": "/models/other.gguf"})) == {"smollm2": SMOLLM2_MEASURED}
    stated = manifest({"cost_model": {"prefill_s_per_token": 1e-5, "decode_s_per_token": 2e-3}})
    assert set(cost_models(stated)) == {"smollm2", "big", "oracle"}  # a stated model applies to every agent
    assert cost_models({"job": manifest({})["job"]}) == {}  # the reader names no engine: only what the run recorded
    with pytest.raises(ValidationError):
        CostModel(prefill_s_per_token=0, decode_s_per_token=1)


def test_the_estimate_is_uncached_prefill_plus_decode() -> None:
    model = CostModel(prefill_s_per_token=0.001, decode_s_per_token=0.01)
    rows = [{"model": "m", "episodes": 4, "uncached_prompt_tokens": 1000, "completion_tokens": 100},
            {"model": "other", "episodes": 1, "uncached_prompt_tokens": 5, "completion_tokens": 5},
            {"model": "m", "episodes": 1, "uncached_prompt_tokens": None, "completion_tokens": None}]
    priced = with_gpu_seconds(rows, {"m": model})
    assert priced[0]["gpu_s"] == pytest.approx(2.0) and priced[0]["gpu_s_per_episode"] == pytest.approx(0.5)
    assert priced[0]["cost_source"] == "analysis.cost_model"
    assert (priced[1]["gpu_s"], priced[1]["cost_source"]) == (None, None)  # no cost model for its model
    assert priced[2]["gpu_s"] is None  # no tokens: no estimate, not 0


def test_a_hand_edited_cost_model_is_refused_where_the_manifest_is_read(tmp_path: Path) -> None:
    recorded = manifest({})
    (tmp_path / MANIFEST).write_text(json.dumps({"sweep_id": "s", **recorded}))
    assert cost_models(read_manifest(tmp_path) or {}) == {"smollm2": SMOLLM2_MEASURED}
    recorded["cost_models"]["smollm2"]["decode_s_per_token"] = "fast"
    (tmp_path / MANIFEST).write_text(json.dumps({"sweep_id": "s", **recorded}))
    with pytest.raises(ManifestError, match="cost_models.smollm2.decode_s_per_token"):
        read_manifest(tmp_path)
