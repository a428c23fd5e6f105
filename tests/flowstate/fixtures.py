"""Test fixtures for the method: output builders, a scripted policy and an in-memory environment.

Shared by the core tests and by pipeline tests that need a deterministic policy."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from flowstate import (
    ChatMessage,
    Completion,
    Embeddings,
    Environment,
    MethodCallers,
    RequestEnd,
    RequestOutcome,
    RequestStart,
    SamplingOverride,
    TaskPrompt,
    TokenUsage,
    ToolCall,
    ToolResult,
    new_session,
)

TASK = TaskPrompt(task_policy="POLICY-TEXT", available_tools="TOOLS-TEXT")


def tagged(focus: Sequence[Any] = (), delta: Sequence[Any] = (), calls: Sequence[Any] = (), message: str | None = None) -> str:
    """A well-formed tagged-mode output with the four blocks of appendix B.3."""
    return (
        f"<state_focus>\n{json.dumps(list(focus))}\n</state_focus>\n"
        f"<state_delta>\n{json.dumps(list(delta))}\n</state_delta>\n"
        f"<tool_calls>\n{json.dumps(list(calls))}\n</tool_calls>\n"
        f"<assistant_message>\n{json.dumps({'content': message})}\n</assistant_message>"
    )


def add(state_id: str, state_set: str = "knowledge", refs: Sequence[tuple[str, str]] = (), **extra: Any) -> dict[str, Any]:
    op = {"state_set": state_set, "operation": "add", "state_id": state_id, "summary": f"summary of {state_id}",
          "value": {"id": state_id}, "refs": [{"rel": rel, "state_id": target} for rel, target in refs]}
    op.update(extra)
    return op


class ScriptedPolicyFixture:
    """TEST FIXTURE: a deterministic policy answering from a script (text, or a function of the prompt)."""

    def __init__(self, script: Sequence[str | Callable[[Sequence[ChatMessage]], str]]) -> None:
        self.script = list(script)
        self.calls: list[list[ChatMessage]] = []
        self.schemas: list[Any] = []
        self.samplings: list[SamplingOverride] = []

    def with_sampling(self, override: SamplingOverride) -> SampledFixture:
        return SampledFixture(self, override)

    async def complete(self, messages: Sequence[ChatMessage], *, json_schema: Any = None) -> Completion:
        self.calls.append(list(messages))
        self.schemas.append(json_schema)
        if not self.script:
            raise AssertionError("scripted policy ran out of outputs")
        item = self.script.pop(0)
        text = item(messages) if callable(item) else item
        prompt_chars = sum(len(m.content) for m in messages)
        return Completion(text=text, usage=TokenUsage(prompt_tokens=prompt_chars // 4, completion_tokens=len(text) // 4),
                          latency_s=0.001)


class SampledFixture:
    """TEST FIXTURE: a scripted policy seen through ``with_sampling``: calls go to the script, each
    with the override it was made with (kept in ``ScriptedPolicyFixture.samplings``)."""

    def __init__(self, inner: ScriptedPolicyFixture, override: SamplingOverride) -> None:
        self.inner, self.override = inner, override

    async def complete(self, messages: Sequence[ChatMessage], *, json_schema: Any = None) -> Completion:
        self.inner.samplings.append(self.override)
        return await self.inner.complete(messages, json_schema=json_schema)


class BagOfWordsEmbedderFixture:
    """TEST FIXTURE: an embedder counting lower-cased words into ``dims`` hashed buckets (texts
    sharing words are similar); keeps every batch it was given."""

    def __init__(self, dims: int = 64) -> None:
        self.dims = dims
        self.inputs: list[list[str]] = []

    async def embed(self, texts: Sequence[str]) -> Embeddings:
        self.inputs.append(list(texts))
        vectors = []
        for text in texts:
            vector = [0.0] * self.dims
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % self.dims] += 1.0
            vectors.append(vector)
        return Embeddings(vectors=vectors, prompt_tokens=sum(len(t.split()) for t in texts))


class EnvironmentFixture(Environment):
    """TEST FIXTURE: a scripted user (a list of requests) and tools answered from a dict."""

    def __init__(self, requests: Sequence[str], tools: dict[str, str] | None = None, max_errors: int | None = None) -> None:
        self.requests = list(requests)
        self.tools = tools or {}
        self.max_errors = max_errors
        self.errors = 0
        self.executed: list[ToolCall] = []
        self.responses: list[str] = []
        self._termination: str | None = None

    @property
    def termination(self) -> str | None:
        return self._termination

    async def first_request(self) -> str | None:
        return self._next()

    async def execute(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        results = []
        for call in calls:
            self.executed.append(call)
            if call.name in self.tools:
                results.append(ToolResult(content=self.tools[call.name]))
            else:
                self.errors += 1
                results.append(ToolResult(content=f"Error: Tool '{call.name}' not found.", error=True))
        if self.max_errors is not None and self.errors >= self.max_errors:
            self._termination = "too_many_errors"
        return results

    async def respond(self, message: str) -> str | None:
        self.responses.append(message)
        return self._next()

    def _next(self) -> str | None:
        if not self.requests:
            self._termination = "user_stop"
            return None
        return self.requests.pop(0)


class Driver:
    """Drives a session by hand, as the loop would (each call runs to completion)."""

    def __init__(self, method: str | dict, tool_names: list[str] | None = None,
                 callers: MethodCallers = MethodCallers()) -> None:
        self.session = new_session(method, TASK, tool_names, callers)
        self.request = 0

    def begin(self, query: str) -> None:
        self.request += 1
        self.session.clock.request, self.session.clock.step = self.request, 0
        asyncio.run(self.session.begin_request(RequestStart(index=self.request, query=query, memory_query=query)))

    def messages(self, observation=None):
        return asyncio.run(self.session.messages(observation))

    def apply(self, parsed):
        return asyncio.run(self.session.apply(parsed))

    def observe(self, step: int, content: str, summary: str):
        return asyncio.run(self.session.add_observation(step, content, summary))

    def end(self, final_response: str | None = None) -> None:
        outcome = RequestOutcome(index=self.request, query="", ended=RequestEnd.RESPONSE, final_response=final_response,
                                 steps=[])
        asyncio.run(self.session.end_request(outcome))
