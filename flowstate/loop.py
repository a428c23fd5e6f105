"""Algorithm 1 for one episode, over a :class:`Policy` and an :class:`Environment`.

:class:`StepRunner` holds the per-step bookkeeping (parse, ISU/PSA, observations, records) so
that the same code serves the live loop (:func:`run_episode`) and trace replay, which feeds
recorded completions instead of calling a model.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from flowstate.chat import ChatMessage, Completion, ContextOverflowError, Policy, TokenCounter, estimate_tokens
from flowstate.environment import Environment
from flowstate.methods import Capability, MethodSession, render_trajectory
from flowstate.protocol import ParsedOutput, parse_output
from flowstate.records import MethodRecord, ModelExchange, RequestEnd, RequestOutcome, RequestStart, StepRecord
from flowstate.repository import RepositoryExport
from flowstate.runtime import Observation
from flowstate.tools import ToolResult

# Termination reasons the loop itself produces (environments add their own, e.g. user_stop).
MAX_STEPS = "max_steps"
CONTEXT_OVERFLOW = "context_overflow"
# A method's own model (its memory model) was given a prompt longer than its window.
MEMORY_CONTEXT_OVERFLOW = "memory_context_overflow"
NO_REQUEST = "no_request"
ENVIRONMENT_DONE = "environment_done"

class LoopLimits(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # Model invocations per request (state-only steps count). Reaching it ends the request; the
    # environment decides whether the episode goes on (τ-bench: it ends, as ``max_steps``).
    max_steps_per_request: int = Field(default=30, ge=1)


class EpisodeResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    termination: str
    requests: int
    steps: list[StepRecord]
    exchanges: list[ModelExchange]
    # The state the method kept (FlowState: the final Persistent State Repository).
    repository: RepositoryExport | None = None
    # What the method chose to record (retrievals, writes, states before and after).
    records: list[MethodRecord] = []


class StepRunner:
    """Step bookkeeping for one method session; knows nothing of models or environments."""

    def __init__(self, session: MethodSession[Any], count_tokens: TokenCounter = estimate_tokens) -> None:
        self.session = session
        self.count_tokens = count_tokens
        self.clock = session.clock
        self.steps: list[StepRecord] = []
        self.exchanges: list[ModelExchange] = []
        self._query: str | None = None
        self._request_query = ""
        self._request_first_step = 0
        self._stores_memory = Capability.MEMORY in session.used

    @property
    def request(self) -> int:
        return self.clock.request

    async def begin_request(self, query: str, env: Environment | None = None) -> None:
        self.clock.request += 1
        self.clock.step = 0
        self._query = self._request_query = query
        self._request_first_step = len(self.steps)
        memory_query, initial = query, []
        if env is not None and self._stores_memory:
            memory_query = env.memory_query(query)
            initial = env.initial_memory() if self.clock.request == 1 else []
        await self.session.begin_request(RequestStart(index=self.clock.request, query=query, memory_query=memory_query,
                                                      memory_entries=initial))

    async def prompt(self, observation: Observation | None) -> list[ChatMessage]:
        self.clock.step += 1
        return await self.session.messages(observation)

    async def record_output(self, messages: Sequence[ChatMessage], completion: Completion) -> tuple[StepRecord, ParsedOutput]:
        """Parse one output, apply ISU and PSA, and record the step (lines 8-13 of Algorithm 1)."""
        parsed = parse_output(completion.text, self.session.options.protocol).keep_state_blocks(self.session.state_blocks())
        if parsed.tool_calls and parsed.assistant_message is not None:
            parsed.warnings.append("output had both tool calls and a message: ran the tools, dropped the message")
            parsed.assistant_message = None
        if not parsed.usable and not parsed.errors:
            parsed.errors.append("no usable output: all protocol parts are empty")
        effects = await self.session.apply(parsed)
        request, step = self.clock.request, self.clock.step
        calls = [c.model_copy(update={"id": f"call_{request}_{step}_{i}"}) for i, c in enumerate(parsed.tool_calls, 1)]
        stats = self.session.last_stats
        usage = completion.usage
        record = StepRecord(
            **dict(effects),
            request=request,
            step=step,
            query=self._query,
            proposed_ops=parsed.state_delta,
            tool_calls=calls,
            assistant_message=parsed.assistant_message,
            parse_errors=parsed.errors,
            protocol_warnings=parsed.warnings,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cached_tokens=usage.cached_tokens,
            cached_tokens_estimate=usage.cached_tokens_estimate,
            tokens_counted=usage.counted,
            reusable_prefix_tokens=usage.reusable_prefix_tokens,
            physical_limit_tokens=usage.physical_limit_tokens,
            latency_s=completion.latency_s,
            finish_reason=completion.finish_reason,
            served_model=completion.model,
            served_by=completion.served_by,
            prompt_chars=sum(len(m.content) for m in messages),
            active_nodes=stats.active_nodes,
            active_state_tokens=self.count_tokens(stats.active_state_text),
            index_states=stats.index_states,
        )
        self._query = None
        self.steps.append(record)
        self.exchanges.append(
            ModelExchange(request=request, step=step, messages=list(messages), completion=completion.text)
        )
        return record, parsed

    async def record_observation(self, record: StepRecord, results: Sequence[ToolResult]) -> Observation:
        """Give the step's tool results one observation ``obs_{k}_{t}`` (several calls: a JSON list)."""
        content = results[0].content if len(results) == 1 else json.dumps([r.content for r in results], ensure_ascii=False)
        names = ", ".join(c.name for c in record.tool_calls)
        summary = f"Raw result of {names} (request {record.request}, step {record.step})"
        observation = await self.session.add_observation(record.step, content, summary)
        record.observation_id = observation.obs_id
        record.observation = content
        record.observation_summary = summary
        record.tool_errors = sum(r.error for r in results)
        return observation

    async def end_request(self, ended: RequestEnd, final_response: str | None, env: Environment | None = None) -> None:
        outcome = RequestOutcome(index=self.clock.request, query=self._request_query, ended=ended,
                                 final_response=final_response, steps=self.steps[self._request_first_step:])
        if self._stores_memory:
            entries = env.memory_entries(outcome) if env is not None else None
            outcome.memory_entries = entries if entries is not None else [render_trajectory(outcome)]
        await self.session.end_request(outcome)

    def result(self, termination: str) -> EpisodeResult:
        return EpisodeResult(
            termination=termination,
            requests=self.clock.request,
            steps=self.steps,
            exchanges=self.exchanges,
            repository=self.session.final_state(),
            records=self.session.records,
        )


@dataclass(frozen=True)
class _RequestEnd:
    ended: RequestEnd
    next_query: str | None
    termination: str | None
    final_response: str | None = None


async def run_episode(
    session: MethodSession[Any],
    policy: Policy,
    env: Environment,
    *,
    limits: LoopLimits = LoopLimits(),
    count_tokens: TokenCounter = estimate_tokens,
) -> EpisodeResult:
    """Run requests until the environment ends the episode or a limit is reached.

    Model failures (unparseable or empty outputs) are recorded steps, never exceptions. Faults
    outside the model (an endpoint down after retries) propagate: they are infrastructure errors.
    """
    runner = StepRunner(session, count_tokens)
    try:
        query = await env.first_request()
        termination = env.termination or (NO_REQUEST if query is None else None)
        while query is not None and termination is None:
            try:
                await runner.begin_request(query, env)
                end = await _run_request(runner, policy, env, limits)
                await runner.end_request(end.ended, end.final_response, env)
            except ContextOverflowError:  # the agent's own overflow ends its request in _run_request
                termination = MEMORY_CONTEXT_OVERFLOW
                break
            query, termination = end.next_query, end.termination
        return runner.result(termination or env.termination or ENVIRONMENT_DONE)
    finally:
        await session.aclose()


async def _run_request(runner: StepRunner, policy: Policy, env: Environment, limits: LoopLimits) -> _RequestEnd:
    """One request q_k: steps until a final response, or until the environment or a limit ends it."""
    observation: Observation | None = None
    for _ in range(limits.max_steps_per_request):
        messages = await runner.prompt(observation)
        try:
            completion = await policy.complete(messages, json_schema=runner.session.json_schema)
        except ContextOverflowError:
            return _RequestEnd(RequestEnd.EPISODE_END, None, CONTEXT_OVERFLOW)
        record, parsed = await runner.record_output(messages, completion)
        observation = None
        if parsed.tool_calls:
            results = await env.execute(record.tool_calls)
            observation = await runner.record_observation(record, results)
            if env.termination:
                return _RequestEnd(RequestEnd.EPISODE_END, None, env.termination)
            if env.request_done:
                return await _ended_by(env, RequestEnd.ENVIRONMENT, ENVIRONMENT_DONE)
        elif parsed.assistant_message is not None:
            next_query = await env.respond(parsed.assistant_message)
            return _RequestEnd(RequestEnd.RESPONSE, next_query,
                               env.termination or (ENVIRONMENT_DONE if next_query is None else None),
                               parsed.assistant_message)
    return await _ended_by(env, RequestEnd.STEP_LIMIT, MAX_STEPS)


async def _ended_by(env: Environment, ended: RequestEnd, otherwise: str) -> _RequestEnd:
    """The request ended without a response: the environment says whether the episode goes on."""
    next_query = await env.end_request(ended)
    return _RequestEnd(ended, next_query, env.termination or (otherwise if next_query is None else None))
