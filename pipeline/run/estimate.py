"""Rough model-call and token estimates for ``flowstate run --dry-run``.

Where the sweep already has finished episodes of a cell, their averages are used; otherwise a
heuristic: the benchmark's expected episode (requests, steps, memory entries) gives the agent's
calls, each with the cell's system prompt, and the method declares the calls of its own models
(``MethodSession.own_calls``). Labelled as an estimate wherever it is shown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from flowstate import METHODS, ChatMessage, Completion, Embeddings, MethodCallers, estimate_tokens
from pipeline.benchmarks.base import benchmark_of, episode_prompt
from pipeline.config.sweep import Sweep
from pipeline.core.specs import Cell, EpisodeSpec, ModelUse
from pipeline.store.files import table_files
from pipeline.store.reader import select

# Heuristic per call: the agent sees the system prompt plus this much context; other roles this much.
CONTEXT_TOKENS_PER_CALL = 1000
OTHER_TOKENS_PER_CALL = 800


class NoModel:
    """The models a session is built with to show its system message: a dry run calls none."""

    async def complete(self, messages: Sequence[ChatMessage], *,
                       json_schema: Mapping[str, Any] | None = None) -> Completion:
        raise AssertionError("a dry run calls no model")

    async def embed(self, texts: Sequence[str]) -> Embeddings:
        raise AssertionError("a dry run calls no model")


NO_MODELS = MethodCallers(memory=NoModel(), embeddings=NoModel())


class CellEstimate(BaseModel):
    cell: str
    episodes: int
    done: int
    model_calls: float
    tokens: float
    source: str  # "measured (n episodes)" or "heuristic"


def _measured(sweep_dir: Path) -> dict[str, tuple[int, float, float]]:
    """cell_id -> (episodes, mean model calls, mean tokens) from finished episodes."""
    if not sweep_dir.is_dir():
        return {}
    rows = select(table_files(sweep_dir)["messages"],
                  "cell_id, count(DISTINCT episode_id) AS n, count(*) / count(DISTINCT episode_id) AS calls, "
                  "sum(coalesce(prompt_tokens, 0) + coalesce(completion_tokens, 0)) / count(DISTINCT episode_id) AS tokens",
                  "GROUP BY cell_id")
    return {r["cell_id"]: (r["n"], r["calls"], r["tokens"]) for r in rows}


def _heuristic(cell: Cell, episodes: Sequence[EpisodeSpec]) -> tuple[float, float]:
    bench = cell.benchmark
    benchmark = benchmark_of(bench)
    method = METHODS.get(cell.method.name)
    system_tokens: dict[object, int] = {}
    calls = tokens = 0.0
    for spec in episodes:
        prompt = episode_prompt(bench, spec.task_id)
        if prompt not in system_tokens:  # the system message only (no model is called)
            session = method.session(prompt, cell.method, benchmark.tool_names(bench, spec.task_id), NO_MODELS)
            system_tokens[prompt] = estimate_tokens(session.system_message.content)
        expected = benchmark.expected_episode(bench, spec.task_id)
        shape, other_calls = expected.shape, expected.other_calls
        if not any(isinstance(use, ModelUse) for use in (spec.user_simulator, spec.judge, spec.tool_model)):
            other_calls = 0
        own = method.own_calls(cell.method, prompt, shape)
        calls += shape.steps + other_calls + own.memory + own.embeddings
        tokens += (shape.steps * (system_tokens[prompt] + CONTEXT_TOKENS_PER_CALL) + other_calls * OTHER_TOKENS_PER_CALL
                   + own.memory_tokens + own.embedding_tokens)
    return calls, tokens


def estimate(sweep: Sweep, sweep_dir: Path, done: Set[str]) -> list[CellEstimate]:
    measured = _measured(sweep_dir)
    estimates = []
    for cell in sweep.cells:
        episodes = sweep.episodes.of_cell(cell.cell_id)
        pending = episodes.without(done)
        if cell.cell_id in measured:
            n, calls, tokens = measured[cell.cell_id]
            source = f"measured ({n} episodes)"
            calls, tokens = calls * len(pending), tokens * len(pending)
        else:
            source = "heuristic"
            calls, tokens = _heuristic(cell, pending)
        estimates.append(CellEstimate(cell=cell.label, episodes=len(episodes), done=len(episodes) - len(pending),
                                      model_calls=calls, tokens=tokens, source=source))
    return estimates
