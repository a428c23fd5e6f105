"""One episode of a sweep, start to finish: environment, method, loop, grading.

This module knows how to assemble a τ-bench episode from an :class:`EpisodeSpec` and already
resolved model policies; it knows nothing of Ray or files (the actor wraps it, the store writes it).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from flowstate import ChatMessage, Completion, EpisodeResult, LoopLimits, Policy, TaskPrompt, new_session, run_episode
from pipeline.benchmarks import taubench
from pipeline.benchmarks.transcript import TranscriptMessage
from pipeline.sweep import EpisodeSpec

Caller = Literal["agent", "user_simulator", "judge"]

# The role sentence upstream's agent instruction opens with, in the task-policy slot (the
# protocol and ReAct rules already say how to answer, so upstream's format lines are not repeated).
TAU_ROLE = "You are a customer service agent that helps the user according to the policy below."
JUDGE_ATTEMPTS = 3


class CallRecord(BaseModel):
    """One model call by the user simulator or the judge (agent calls are the loop's exchanges)."""

    model_config = ConfigDict(extra="forbid")

    caller: Caller
    messages: list[ChatMessage]
    completion: Completion


class RecordingPolicy:
    """Wraps a policy and keeps every completed call, so all model traffic reaches the messages table."""

    def __init__(self, inner: Policy, caller: Caller, log: list[CallRecord]) -> None:
        self.inner = inner
        self.caller = caller
        self.log = log

    async def complete(self, messages: Sequence[ChatMessage], *, json_schema: Any = None) -> Completion:
        completion = await self.inner.complete(messages, json_schema=json_schema)
        self.log.append(CallRecord(caller=self.caller, messages=list(messages), completion=completion))
        return completion


class EpisodeOutcome(BaseModel):
    """Everything one finished episode produced; the store turns it into rows."""

    model_config = ConfigDict(extra="forbid")

    spec: EpisodeSpec
    result: EpisodeResult
    transcript: list[TranscriptMessage]
    reward: taubench.RewardInfo | None
    grading_error: str | None = None
    calls: list[CallRecord]
    started_at: datetime
    finished_at: datetime
    duration_s: float


@cache
def task_prompt(domain: str, tool_rendering: str) -> TaskPrompt:
    """The benchmark's part of every method's system prompt: role + policy, and the tool list
    (built once per process: the data behind it is verified and immutable)."""
    if tool_rendering == "compact":
        tools = taubench.compact_tool_list(domain)
    else:
        tools = "\n".join(json.dumps(schema, ensure_ascii=False) for schema in taubench.tool_list(domain))
    return TaskPrompt(task_policy=f"{TAU_ROLE}\n\n{taubench.policy(domain)}", available_tools=tools)


async def run_taubench_episode(
    spec: EpisodeSpec,
    agent: Policy,
    user_policy: Policy | None,
    judge: Policy | None,
    limits: LoopLimits,
) -> EpisodeOutcome:
    """Simulate one τ-bench task with one method and grade it (see TOOLS.md §6-§7)."""
    started = datetime.now(UTC)
    clock = time.perf_counter()
    bench = spec.cell.benchmark
    task = taubench.get_task(bench.domain, spec.task_id)
    calls: list[CallRecord] = []
    user: taubench.UserSimulator = (
        taubench.ScriptedUser(task) if user_policy is None
        else taubench.LLMUserSimulator(RecordingPolicy(user_policy, "user_simulator", calls), task)
    )
    env = taubench.TauEpisode(task, user, max_steps=bench.max_env_steps, max_errors=bench.max_errors)
    tool_names = list(taubench.tool_schemas(bench.domain).kinds)
    session = new_session(spec.cell.method.name, task_prompt(bench.domain, bench.tool_rendering),
                          spec.cell.method.options, tool_names)
    result = await run_episode(session, agent, env, limits=limits)
    reward, grading_error = await grade_with_retries(
        task, env.transcript, result.termination, basis=bench.reward_basis,
        judge=RecordingPolicy(judge, "judge", calls) if judge is not None else None,
    )
    return EpisodeOutcome(
        spec=spec, result=result, transcript=env.transcript, reward=reward, grading_error=grading_error,
        calls=calls, started_at=started, finished_at=datetime.now(UTC), duration_s=time.perf_counter() - clock,
    )


async def grade_with_retries(
    task: taubench.Task, transcript: Sequence[TranscriptMessage], termination: str, *,
    basis: Literal["task", "classic"], judge: Policy | None,
) -> tuple[taubench.RewardInfo | None, str | None]:
    """Grade; a judge reply that is not the expected JSON is asked again, then recorded as an error.

    The trajectory is kept either way: ``flowstate grade`` can grade it again later.
    """
    error = None
    for _ in range(JUDGE_ATTEMPTS):
        try:
            return await taubench.grade(task, transcript, termination, judge=judge, basis=basis), None
        except taubench.JudgeOutputError as exc:
            error = f"judge output unusable after {JUDGE_ATTEMPTS} attempts: {exc}"
    return None, error
