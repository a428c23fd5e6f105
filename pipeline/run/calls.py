"""Every model call of an episode, in call order: the agent's, the method's own (memory, embeddings)
and the benchmark's (user simulator, judge, tool model). What the messages table holds; and every
fault of those calls (each failed attempt, retried or not, and each completion cut at
``max_tokens``), what the faults table holds.

Calls made inside a step (the agent's, the method's, a tool's model) carry the request and step
they belong to; the user simulator's and the judge's belong to the conversation, not to a step.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any, overload

from pydantic import BaseModel, ConfigDict

from flowstate import (
    ChatMessage,
    Completion,
    Embedder,
    Embeddings,
    Policy,
    SamplingOverride,
    StepClock,
    TokenUsage,
    with_sampling,
)
from pipeline.core.roles import Role
from pipeline.llm.faults import FaultReport, FaultSink, reporting_faults


class ModelCall(BaseModel):
    """One recorded call: what was sent, what came back, and its cost."""

    model_config = ConfigDict(extra="forbid")

    seq: int
    caller: Role
    request: int | None = None
    step: int | None = None
    # Chat: the messages; embeddings: {"input": [texts]}.
    prompt: Any
    completion: str
    usage: TokenUsage
    latency_s: float = 0.0
    served_model: str | None = None
    served_by: str | None = None


class CallFault(FaultReport):
    """A fault of one of an episode's calls, with where it happened: the episode's attempt (the
    driver's count), the role that called, its request and step, and the job's deployment."""

    episode_attempt: int
    caller: Role
    request: int | None = None
    step: int | None = None
    deployment: str | None = None


class CallLog:
    """Wraps an episode's callers so that each completed call is appended here, numbered in call
    order, and each fault of a call (reported by the client while the call runs) to ``faults``.

    ``clock`` is the session's step clock, set once the session exists (before any call).
    ``deployments``: the job's deployment name of each role; ``attempt``: the episode's attempt.
    """

    def __init__(self, deployments: Mapping[Role, str] | None = None, attempt: int = 1) -> None:
        self.calls: list[ModelCall] = []
        self.faults: list[CallFault] = []
        self.clock: StepClock | None = None
        self.deployments = dict(deployments or {})
        self.attempt = attempt
        self._seq = itertools.count()

    @overload
    def chat(self, policy: Policy, caller: Role, *, in_step: bool) -> RecordingPolicy: ...

    @overload
    def chat(self, policy: None, caller: Role, *, in_step: bool) -> None: ...

    def chat(self, policy: Policy | None, caller: Role, *, in_step: bool) -> RecordingPolicy | None:
        """``policy`` recorded as ``caller`` (``None`` stays ``None``: an absent role)."""
        return RecordingPolicy(policy, caller, self, in_step) if policy is not None else None

    def embedder(self, embedder: Embedder | None) -> RecordingEmbedder | None:
        return RecordingEmbedder(embedder, self) if embedder is not None else None

    def add(self, caller: Role, in_step: bool, prompt: Any, completion: str, usage: TokenUsage, latency_s: float,
            served_model: str | None, served_by: str | None) -> None:
        clock = self.clock if in_step else None
        self.calls.append(ModelCall(seq=next(self._seq), caller=caller, request=clock.request if clock else None,
                                    step=clock.step if clock else None, prompt=prompt, completion=completion,
                                    usage=usage, latency_s=latency_s, served_model=served_model, served_by=served_by))

    def fault_sink(self, caller: Role, in_step: bool) -> FaultSink:
        """Where the faults of one of ``caller``'s calls go (see :mod:`pipeline.llm.faults`)."""

        def record(report: FaultReport) -> None:
            clock = self.clock if in_step else None
            self.faults.append(CallFault(**report.model_dump(), episode_attempt=self.attempt, caller=caller,
                                         request=clock.request if clock else None, step=clock.step if clock else None,
                                         deployment=self.deployments.get(caller)))

        return record

    def of(self, caller: Role) -> list[ModelCall]:
        return [c for c in self.calls if c.caller == caller]


class RecordingPolicy:
    def __init__(self, inner: Policy, caller: Role, log: CallLog, in_step: bool) -> None:
        self.inner, self.caller, self.log, self.in_step = inner, caller, log, in_step

    def with_sampling(self, override: SamplingOverride) -> RecordingPolicy:
        return RecordingPolicy(with_sampling(self.inner, override), self.caller, self.log, self.in_step)

    async def complete(self, messages: Sequence[ChatMessage], *, json_schema: Any = None) -> Completion:
        with reporting_faults(self.log.fault_sink(self.caller, self.in_step)):
            completion = await self.inner.complete(messages, json_schema=json_schema)
        self.log.add(self.caller, self.in_step, [m.model_dump() for m in messages], completion.text, completion.usage,
                     completion.latency_s, completion.model, completion.served_by)
        return completion


class RecordingEmbedder:
    def __init__(self, inner: Embedder, log: CallLog) -> None:
        self.inner, self.log = inner, log

    async def embed(self, texts: Sequence[str]) -> Embeddings:
        with reporting_faults(self.log.fault_sink("embeddings", True)):
            result = await self.inner.embed(texts)
        dims = len(result.vectors[0]) if result.vectors else 0
        self.log.add("embeddings", True, {"input": list(texts)}, f"{len(result.vectors)} vectors of {dims} dimensions",
                     TokenUsage(prompt_tokens=result.prompt_tokens), result.latency_s, result.model, None)
        return result
