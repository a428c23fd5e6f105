"""FlowState's ``prompt_layout`` in the pipeline: recorded per cell in the manifest, and the oracle
fixture (which reads the disclosed plan from the Active State in its prompt) passes τ-bench tasks with
the cache-friendly layout too (all 164 in ``perf/prompt_cache.py``; the first 12 of each domain here)."""

from __future__ import annotations

import asyncio

import pytest
import yaml

from flowstate import LoopLimits, method_options
from flowstate.methods.layout import PromptLayout, layout_sha256
from pipeline.benchmarks import taubench
from pipeline.core.specs import AgentModel, Cell, EpisodeSpec
from pipeline.run.episode import EpisodeCallers, run_sweep_episode
from pipeline.run.manifest import write_manifest
from pipeline.run.plan import locate_sweep
from pipeline.run.scripted_policies import oracle_for
from pipeline.store.manifest import read_manifest


def test_the_manifest_records_each_cells_prompt_layout(tmp_path):
    job = {"name": "layouts", "benchmarks": [{"benchmark": "taubench", "domain": "airline", "tasks": ["0"]}],
           "methods": [{"name": "flowstate"}, {"name": "flowstate", "prompt_layout": "cache_friendly"},
                       {"name": "full_context"}],
           "agents": [{"deployment": "oracle"}], "user_simulator": "scripted",
           "deployments": {"oracle": {"kind": "scripted", "name": "oracle"}}}
    path = tmp_path / "layouts.yaml"
    path.write_text(yaml.safe_dump(job))
    sweep, sweep_dir = locate_sweep(path, out=tmp_path / "runs")
    write_manifest(sweep, sweep_dir, job_path=path)
    layouts = read_manifest(sweep_dir)["prompt_layouts"]
    cells = {c.label: c.cell_id for c in sweep.cells}
    assert layouts == {
        cells["taubench.airline.flowstate.oracle"]: {"layout": "paper", "sha256": layout_sha256(PromptLayout.PAPER)},
        cells["taubench.airline.flowstate-cache_friendly.oracle"]: {
            "layout": "cache_friendly", "sha256": layout_sha256(PromptLayout.CACHE_FRIENDLY)},
    }


async def _run_all(domain: str, protocol: str):
    outcomes = {}
    options = method_options({"name": "flowstate", "protocol": protocol, "prompt_layout": "cache_friendly"})
    cell = Cell(cell_id="c", label="oracle", benchmark=taubench.TauBenchCell(domain=domain, reward_basis="classic"),
                method=options, agent=AgentModel(deployment="oracle"))
    for task in taubench.load_tasks(domain)[:12]:
        spec = EpisodeSpec(episode_id=f"{domain}-{task.id}", sweep_id="s", cell=cell, task_id=task.id, trial=0, seed=0,
                           user_simulator="scripted", judge="none")
        outcomes[task.id] = await run_sweep_episode(spec, EpisodeCallers(agent=oracle_for(spec)), LoopLimits())
    return outcomes


@pytest.mark.parametrize(("domain", "protocol"), [("airline", "tagged"), ("retail", "json")])
def test_the_oracle_passes_with_the_cache_friendly_layout(domain, protocol):
    outcomes = asyncio.run(_run_all(domain, protocol))
    assert all(o.grade is not None and o.grade.success for o in outcomes.values())
    assert any(s.disclosed for o in outcomes.values() for s in o.result.steps)  # PSA ran, read from the prompt
    first = next(o for o in outcomes.values() if o.calls)
    prompt = first.calls[0].prompt[1]["content"]  # the per-request blocks ahead of the per-step ones
    assert prompt.startswith("<agent_status>\nHistorical State Index:")
    assert prompt.index("<user_query>") < prompt.index("Active State:") < prompt.index("<latest_observation>")
