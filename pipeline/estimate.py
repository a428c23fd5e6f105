"""Rough model-call and token estimates for ``flowstate run --dry-run``.

Where the sweep already has finished episodes of a cell, their averages are used; otherwise a
heuristic from the task's gold actions and the size of the cell's system prompt. Labelled as an
estimate wherever it is shown.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from flowstate import estimate_tokens, new_session
from pipeline.benchmarks import taubench
from pipeline.episodes import task_prompt
from pipeline.store.files import table_files
from pipeline.store.reader import select
from pipeline.sweep import Cell, EpisodeSpec, Sweep

# Heuristic per episode: the agent calls once per gold action plus a few steps for talking
# and (FlowState) state bookkeeping; each call sees the system prompt plus this much context.
EXTRA_AGENT_CALLS = 4
CONTEXT_TOKENS_PER_CALL = 1000
USER_CALLS = 4
USER_TOKENS_PER_CALL = 800


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


def _heuristic(cell: Cell, episodes: list[EpisodeSpec]) -> tuple[float, float]:
    bench = cell.benchmark
    system = new_session(cell.method.name, task_prompt(bench.domain, bench.tool_rendering)).messages(None)[0].content
    per_call = estimate_tokens(system) + CONTEXT_TOKENS_PER_CALL
    calls = tokens = 0.0
    for spec in episodes:
        task = taubench.get_task(bench.domain, spec.task_id)
        agent_calls = len(task.evaluation_criteria.actions) + EXTRA_AGENT_CALLS
        user_calls = 0 if spec.user_simulator == "scripted" else USER_CALLS
        calls += agent_calls + user_calls
        tokens += agent_calls * per_call + user_calls * USER_TOKENS_PER_CALL
    return calls, tokens


def estimate(sweep: Sweep, sweep_dir: Path, done: set[str]) -> list[CellEstimate]:
    measured = _measured(sweep_dir)
    estimates = []
    for cell in sweep.cells:
        episodes = [e for e in sweep.episodes if e.cell.cell_id == cell.cell_id]
        pending = [e for e in episodes if e.episode_id not in done]
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
