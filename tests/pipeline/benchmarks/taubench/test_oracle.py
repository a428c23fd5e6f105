"""The oracle fixture with the scripted user over every τ-bench task, graded on the classic basis.

It exercises protocol, tools, state, persistence and grading together: every task of both domains
must pass, for both methods and both protocol modes. (The oracle is graded against its own gold
actions, so this proves the pipeline, not the tools: tests/pipeline/benchmarks/taubench checks the
tools against gold_hashes.json independently.)
"""

from __future__ import annotations

import asyncio

import pytest

from flowstate import LoopLimits, method_options
from pipeline.benchmarks import taubench
from pipeline.core.specs import AgentModel, Cell, EpisodeSpec
from pipeline.run.episode import EpisodeCallers, run_sweep_episode
from pipeline.run.scripted_policies import UnchangedStatePolicy, oracle_for
from tests.flowstate.fixtures import BagOfWordsEmbedderFixture


def _spec(domain: str, method: str, protocol: str, task_id: str) -> EpisodeSpec:
    cell = Cell(cell_id="c", label="oracle", benchmark=taubench.TauBenchCell(domain=domain, reward_basis="classic"),
                method=method_options({"name": method, "protocol": protocol}), agent=AgentModel(deployment="oracle"))
    return EpisodeSpec(episode_id=f"{domain}-{task_id}", sweep_id="s", cell=cell, task_id=task_id, trial=0, seed=0,
                       user_simulator="scripted", judge="none")


async def _run(spec: EpisodeSpec):
    # the memory model and the embeddings of the methods that call them: fixtures
    callers = EpisodeCallers(agent=oracle_for(spec), memory=UnchangedStatePolicy(), embeddings=BagOfWordsEmbedderFixture())
    return await run_sweep_episode(spec, callers, LoopLimits())


async def _run_all(domain: str, method: str, protocol: str):
    return {task.id: await _run(_spec(domain, method, protocol, task.id)) for task in taubench.load_tasks(domain)}


@pytest.mark.parametrize("protocol", ["tagged", "json"])
@pytest.mark.parametrize("method", ["flowstate", "full_context", "flowstate_no_psa", "flowstate_no_isu", "bm25", "zipact",
                                    "zipact_bm25"])
@pytest.mark.parametrize("domain", ["airline", "retail"])
def test_the_oracle_passes_every_task(domain, method, protocol):
    outcomes = asyncio.run(_run_all(domain, method, protocol))
    passed = {task_id for task_id, o in outcomes.items() if o.grade is not None and o.grade.success}
    assert passed == {t.id for t in taubench.load_tasks(domain)}
    assert all(o.result.termination == "user_stop" for o in outcomes.values())
    assert all(o.grade.basis == "classic: DB×COMMUNICATE" for o in outcomes.values())
    parse_errors = [s.parse_errors for o in outcomes.values() for s in o.result.steps if s.parse_errors]
    assert parse_errors == []


@pytest.mark.parametrize("method", ["reasoningbank", "mem0"])
@pytest.mark.parametrize("domain", ["airline", "retail"])
def test_the_oracle_passes_every_task_with_the_model_written_memories(domain, method):
    """Tagged protocol only (the protocols are the same for every memory method, tested above)."""
    outcomes = asyncio.run(_run_all(domain, method, "tagged"))
    assert all(o.grade is not None and o.grade.success for o in outcomes.values())
    assert all(o.result.termination == "user_stop" for o in outcomes.values())
    roles = {c.caller for o in outcomes.values() for c in o.calls}
    assert roles == {"agent", "memory", "embeddings"}
    several = [o for o in outcomes.values() if o.result.requests > 1]
    assert several and all(any(r.kind == "write" for r in o.result.records) for o in several)


def test_flowstate_oracle_uses_psa_across_requests():
    outcome = asyncio.run(_run(_spec("airline", "flowstate", "tagged", "7")))  # reads, then writes after a "yes"
    assert outcome.result.requests == 2
    disclosed = [(s.request, s.disclosed, s.disclosed_from) for s in outcome.result.steps if s.disclosed]
    assert disclosed == [(2, ["plan_writes"], [1])]
    nodes = {n.state_id: n for n in outcome.result.repository.nodes}
    assert nodes["plan_writes"].type.value == "judgement" and nodes["plan_writes"].source_request == 1
    assert any(n.origin.value == "tool" and n.source_request == 2 for n in nodes.values())
    assert outcome.grade.success and outcome.grade.reward == 1.0
