"""Algorithm 1 for one episode, over a :class:`Policy` and an :class:`Environment`.

:class:`EpisodeRunner` holds the per-step bookkeeping (parse, ISU/PSA, observations, records) so
that the same code serves the live loop (:func:`run_episode`) and trace replay, which feeds
recorded completions instead of calling a model.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from flowstate.chat import ChatMessage, Completion, ContextOverflowError, Policy
from flowstate.environment import Environment, ToolResult
from flowstate.methods import FlowStateSession, MethodSession
from flowstate.protocol import ParsedOutput, parse_output
from flowstate.records import ModelExchange, StepRecord
from flowstate.repository import RepositoryExport
from flowstate.runtime import Observation

# Termination reasons the loop itself produces (environments add their own, e.g. user_stop).
MAX_STEPS = "max_steps"
CONTEXT_OVERFLOW = "context_overflow"
NO_REQUEST = "no_request"
ENVIRONMENT_DONE = "environment_done"

TokenCounter = Callable[[str], int]


def estimate_tokens(text: str) -> int:
    """About four characters per token: a labelled estimate where no tokenizer is at hand."""
    return (len(text) + 3) // 4


class LoopLimits(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # Model invocations per request (state-only steps count); reaching it ends the episode.
    max_steps_per_request: int = Field(default=30, ge=1)


class EpisodeResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    termination: str
    requests: int
    steps: list[StepRecord]
    exchanges: list[ModelExchange]
    # The final Persistent State Repository (FlowState only).
    repository: RepositoryExport | None = None


class EpisodeRunner:
    """Step bookkeeping for one method session; knows nothing of models or environments."""

    def __init__(self, session: MethodSession, count_tokens: TokenCounter = estimate_tokens) -> None:
        self.session = session
        self.count_tokens = count_tokens
        self.steps: list[StepRecord] = []
        self.exchanges: list[ModelExchange] = []
        self.request = 0
        self._step = 0
        self._query: str | None = None

    def begin_request(self, query: str) -> None:
        self.request += 1
        self._step = 0
        self._query = query
        self.session.begin_request(query)

    def prompt(self, observation: Observation | None) -> list[ChatMessage]:
        self._step += 1
        return self.session.messages(observation)

    def record_output(self, messages: Sequence[ChatMessage], completion: Completion) -> tuple[StepRecord, ParsedOutput]:
        """Parse one output, apply ISU and PSA, and record the step (lines 8-13 of Algorithm 1)."""
        parsed = parse_output(completion.text, self.session.options.protocol)
        if not self.session.with_state:
            parsed = parsed.without_state()
        if parsed.tool_calls and parsed.assistant_message is not None:
            parsed.warnings.append("output had both tool calls and a message: ran the tools, dropped the message")
            parsed.assistant_message = None
        if not parsed.usable and not parsed.errors:
            parsed.errors.append("no usable output: all protocol parts are empty")
        effects = self.session.apply(parsed)
        calls = [c.model_copy(update={"id": f"call_{self.request}_{self._step}_{i}"}) for i, c in enumerate(parsed.tool_calls, 1)]
        stats = self.session.last_stats
        usage = completion.usage
        record = StepRecord(
            **dict(effects),
            request=self.request,
            step=self._step,
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
            ModelExchange(request=self.request, step=self._step, messages=list(messages), completion=completion.text)
        )
        return record, parsed

    def record_observation(self, record: StepRecord, results: Sequence[ToolResult]) -> Observation:
        """Give the step's tool results one observation ``obs_{k}_{t}`` (several calls: a JSON list)."""
        content = results[0].content if len(results) == 1 else json.dumps([r.content for r in results], ensure_ascii=False)
        names = ", ".join(c.name for c in record.tool_calls)
        summary = f"Raw result of {names} (request {record.request}, step {record.step})"
        observation = self.session.add_observation(record.step, content, summary)
        record.observation_id = observation.obs_id
        record.observation = content
        record.observation_summary = summary
        record.tool_errors = sum(r.error for r in results)
        return observation

    def end_request(self) -> None:
        self.session.end_request()

    def result(self, termination: str) -> EpisodeResult:
        repository = self.session.runtime.repository.export() if isinstance(self.session, FlowStateSession) else None
        return EpisodeResult(
            termination=termination,
            requests=self.request,
            steps=self.steps,
            exchanges=self.exchanges,
            repository=repository,
        )


async def run_episode(
    session: MethodSession,
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
    runner = EpisodeRunner(session, count_tokens)
    query = await env.first_request()
    termination = env.termination or (NO_REQUEST if query is None else None)
    while query is not None and termination is None:
        runner.begin_request(query)
        query, termination = await _run_request(runner, policy, env, limits)
        runner.end_request()
    return runner.result(termination or env.termination or ENVIRONMENT_DONE)


async def _run_request(
    runner: EpisodeRunner, policy: Policy, env: Environment, limits: LoopLimits
) -> tuple[str | None, str | None]:
    """One request q_k: steps until a final response; returns (next query, termination)."""
    observation: Observation | None = None
    for _ in range(limits.max_steps_per_request):
        messages = runner.prompt(observation)
        try:
            completion = await policy.complete(messages, json_schema=runner.session.json_schema)
        except ContextOverflowError:
            return None, CONTEXT_OVERFLOW
        record, parsed = runner.record_output(messages, completion)
        observation = None
        if parsed.tool_calls:
            results = await env.execute(record.tool_calls)
            observation = runner.record_observation(record, results)
            if env.termination:
                return None, env.termination
        elif parsed.assistant_message is not None:
            next_query = await env.respond(parsed.assistant_message)
            return next_query, env.termination or (ENVIRONMENT_DONE if next_query is None else None)
    return None, MAX_STEPS

