"""One episode of a sweep, start to finish: the benchmark's environment, the method's session, the
loop, grading. Generic: the benchmark and the method are plug-ins found by name.

It knows nothing of Ray or files: the actor wraps it, the store writes what it returns.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict

from flowstate import (
    METHODS,
    Capability,
    Embedder,
    EpisodeResult,
    LoopLimits,
    MethodCallers,
    Policy,
    new_session,
    run_episode,
)
from pipeline.benchmarks.base import (
    EpisodeRecord,
    Grade,
    GradingError,
    JudgeRequiredError,
    RoleCallers,
    benchmark_of,
    episode_prompt,
)
from pipeline.benchmarks.transcript import TranscriptMessage
from pipeline.core.fault_injection import crash_point
from pipeline.core.specs import BenchmarkCell, EpisodeSpec
from pipeline.run.calls import CallFault, CallLog, ModelCall


@dataclass(frozen=True)
class EpisodeCallers:
    """The resolved callers of one episode (``None`` where a role is absent or a benchmark fixture)."""

    agent: Policy
    user_simulator: Policy | None = None
    judge: Policy | None = None
    tool_model: Policy | None = None
    memory: Policy | None = None
    embeddings: Embedder | None = None
    agent_prompt_tokens: int | None = None  # see MethodCallers


class EpisodeOutcome(BaseModel):
    """Everything one finished episode produced; the store turns it into rows."""

    model_config = ConfigDict(extra="forbid")

    spec: EpisodeSpec
    result: EpisodeResult
    transcript: list[TranscriptMessage]
    grade: Grade | None
    grading_error: str | None = None
    calls: list[ModelCall]
    faults: list[CallFault] = []  # of this attempt's calls
    started_at: datetime
    finished_at: datetime
    duration_s: float


async def run_sweep_episode(spec: EpisodeSpec, callers: EpisodeCallers, limits: LoopLimits,
                            log: CallLog | None = None) -> EpisodeOutcome:
    """Run one task with one method on one model, and grade it. Calls and their faults go to
    ``log`` (the caller's, to keep the faults of an episode that raises)."""
    started = datetime.now(UTC)
    clock = time.perf_counter()
    cell = spec.cell.benchmark
    benchmark = benchmark_of(cell)
    uses = METHODS.get(spec.cell.method.name).uses(spec.cell.method)
    log = log if log is not None else CallLog()
    method_callers = MethodCallers(
        memory=log.chat(callers.memory, "memory", in_step=True) if Capability.MEMORY_MODEL in uses else None,
        embeddings=log.embedder(callers.embeddings) if Capability.EMBEDDINGS in uses else None,
        agent_prompt_tokens=callers.agent_prompt_tokens,
    )
    task = episode_prompt(cell, spec.task_id)
    session = new_session(spec.cell.method, task,
                          benchmark.tool_names(cell, spec.task_id), method_callers)
    log.clock = session.clock
    scripted = frozenset(role for role in ("user_simulator", "judge") if getattr(spec, role) == "scripted")
    judge = log.chat(callers.judge or episode_judge(spec), "judge", in_step=False)
    env = await benchmark.environment(cell, spec.task_id, RoleCallers(
        user_simulator=log.chat(callers.user_simulator, "user_simulator", in_step=False), judge=judge,
        tool_model=log.chat(callers.tool_model, "tool_model", in_step=True), scripted=scripted,
    ))
    result = await run_episode(session, log.chat(callers.agent, "agent", in_step=True), env, limits=limits)
    record = EpisodeRecord(transcript=env.transcript, termination=result.termination)
    grade, error = await grade_episode(cell, spec.task_id, record, judge)
    return EpisodeOutcome(
        spec=spec, result=result, transcript=env.transcript, grade=grade, grading_error=error, calls=log.calls,
        faults=log.faults, started_at=started, finished_at=datetime.now(UTC), duration_s=time.perf_counter() - clock,
    )


def episode_judge(spec: EpisodeSpec) -> Policy | None:
    """The benchmark's scripted judge where the job asks for one (``judge: scripted``)."""
    if spec.judge != "scripted":
        return None
    return benchmark_of(spec.cell.benchmark).scripted_judge(spec.cell.benchmark, spec.task_id)


async def grade_episode(cell: BenchmarkCell, task_id: str, record: EpisodeRecord, judge: Policy | None,
                        basis: str | None = None) -> tuple[Grade | None, str | None]:
    """The benchmark's grade, or ``(None, why)`` when it could not decide: the trajectory is kept
    either way, and ``flowstate grade`` can grade it again later. A missing judge is raised."""
    crash_point("grading")
    try:
        return await benchmark_of(cell).grade(cell, task_id, record, judge, basis=basis), None
    except JudgeRequiredError:
        raise
    except GradingError as exc:
        return None, str(exc)
