"""A benchmark, as a plug-in of your own: ``tiny``, in one folder and one registration.

Two tasks, each a fixed list of requests answered by looking a key up (tool ``lookup``) and answering
with a message or with the tool ``submit`` (which ends the request, as a purchase would); graded by
exact match, request by request. Its oracle (a test fixture: ``kind: scripted, name: oracle``) answers
exactly, in any method's protocol. A task ``canary-<anything>`` (named in a cell's ``tasks``) asks t1's
questions, the first with a code to remember (:func:`canary_code`, derived from the task id so that no
id or cell option holds it): what the tests check never reaches another episode.

What makes it a benchmark (see ``pipeline/benchmarks/base.py``): a cell model with
``benchmark: Literal["tiny"]``, a :class:`~pipeline.benchmarks.base.Benchmark` generic in that cell
model (tasks, data checksums, the environment, the prompt parts, grading; the metrics, the oracle and
the domain labels are optional parts), and :func:`~pipeline.benchmarks.base.register_benchmark` when the
module is imported. A job names the module under ``plugins:``; an installed package would declare it
as an entry point of the group ``flowstate.plugins`` instead.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any, Literal

from flowstate import (
    Capability,
    ChatMessage,
    Completion,
    MethodOptions,
    MethodPlugin,
    Policy,
    RequestOutcome,
    TaskPrompt,
    ToolCall,
    ToolResult,
)
from flowstate.protocol import STATE_BLOCKS, render_output
from pipeline.benchmarks.base import Benchmark, EpisodeRecord, Grade, RequestGrade, RoleCallers, register_benchmark
from pipeline.benchmarks.requests import FixedRequests
from pipeline.core.catalog import MetricSpec
from pipeline.core.specs import BenchmarkCell

# task -> [(request text, lookup key, answer)]
TASKS: dict[str, list[tuple[str, str, str]]] = {
    "t1": [("What is the capital of France?", "france", "Paris"), ("And of Italy?", "italy", "Rome")],
    "t2": [("Spell cat backwards.", "cat", "tac"), ("Spell dog backwards.", "dog", "god"),
           ("Spell owl backwards.", "owl", "lwo")],
}
TABLE = {key: answer for requests in TASKS.values() for _, key, answer in requests}
CANARY_TASK = "canary-"


def canary_code(task_id: str) -> str:
    return "CODE" + hashlib.sha256(task_id.encode()).hexdigest()[:16]


def task_requests(task_id: str) -> list[tuple[str, str, str]]:
    """A task's requests: (text, lookup key, answer)."""
    if task_id.startswith(CANARY_TASK):
        (text, key, answer), *rest = TASKS["t1"]
        return [(f"Remember the code {canary_code(task_id)}. {text}", key, answer), *rest]
    return TASKS[task_id]


class TinyCell(BenchmarkCell):
    benchmark: Literal["tiny"] = "tiny"
    domain: Literal["lookup"] = "lookup"
    tasks: list[str] = sorted(TASKS)


class TinyEpisode(FixedRequests):
    def __init__(self, task_id: str) -> None:
        super().__init__([text for text, _, _ in task_requests(task_id)])

    async def run_tool(self, call: ToolCall) -> ToolResult:
        args = call.arguments if isinstance(call.arguments, dict) else {}
        if call.name == "lookup":
            key = str(args.get("key", ""))
            return ToolResult(content=TABLE[key]) if key in TABLE else ToolResult(content=f"no key {key!r}", error=True)
        if call.name == "submit":
            self.end_current_request()
            return ToolResult(content="submitted")
        return ToolResult(content=f"unknown tool {call.name!r}", error=True)

    def memory_query(self, query: str) -> str:
        return f"recall: {query}"

    def memory_entries(self, outcome: RequestOutcome) -> list[str]:
        return [f"Q{outcome.index}: {outcome.query} -> {outcome.final_response or _submitted(outcome)}"]


def _submitted(outcome: RequestOutcome) -> str:
    calls = [c for s in outcome.steps for c in s.tool_calls if c.name == "submit"]
    return str(calls[-1].arguments.get("answer")) if calls else ""


class Tiny(Benchmark[TinyCell]):
    name = "tiny"
    cell = TinyCell
    report_heading = "Tiny results"
    report_caption = "EM = mean share of requests answered exactly; Micro = answered requests over all requests."
    metrics = (
        MetricSpec(name="exact", label="EM", description="share of an episode's requests answered exactly",
                   headline=True),
        MetricSpec(name="micro", label="Micro", aggregate="ratio", numerator="correct", denominator="requests",
                   description="requests answered exactly over all requests", headline=True),
        MetricSpec(name="pass_rate", label="Reward", column="reward", description="mean reward"),
    )

    def task_ids(self, cell: TinyCell) -> list[str]:
        return list(cell.tasks)

    def data_checksums(self, cell: TinyCell) -> dict[str, str]:
        return {}

    def task_prompt(self, cell: TinyCell, task_id: str) -> TaskPrompt:
        return TaskPrompt(task_policy="Answer each question exactly.", available_tools="lookup(key), submit(answer)")

    def tool_names(self, cell: TinyCell, task_id: str) -> list[str]:
        return ["lookup", "submit"]

    async def environment(self, cell: TinyCell, task_id: str, callers: RoleCallers) -> TinyEpisode:
        return TinyEpisode(task_id)

    async def grade(self, cell: TinyCell, task_id: str, record: EpisodeRecord,
                    judge: Policy | None, *, basis: str | None = None) -> Grade:
        requests = task_requests(task_id)
        answers = _answers(record, len(requests))
        correct = [answer == expected for answer, (_, _, expected) in zip(answers, requests, strict=True)]
        exact = sum(correct) / len(correct)
        return Grade(reward=exact, success=all(correct), basis="exact match",
                     metrics={"exact": exact, "correct": float(sum(correct)), "requests": float(len(correct))},
                     requests=[RequestGrade(request=k, correct=c, score=float(c), credit_passed=int(c), credit_total=1,
                                            reason="exact" if c else "different")
                               for k, c in enumerate(correct, 1)])

    def oracle(self, cell: TinyCell, task_id: str, method: MethodPlugin, options: MethodOptions) -> Policy:
        return TinyOracle(task_id, method.uses(options), options.protocol)


def _answers(record: EpisodeRecord, requests: int) -> list[str | None]:
    """Each request's last message or submitted answer."""
    answers: list[str | None] = [None] * requests
    for m in record.transcript:
        if m.role == "assistant" and 1 <= m.request <= requests:
            submitted = [c.arguments.get("answer") for c in m.tool_calls or [] if c.name == "submit"]
            if submitted:
                answers[m.request - 1] = str(submitted[-1])
            elif not m.tool_calls:
                answers[m.request - 1] = m.content
    return answers


_QUERY = re.compile(r"<user_query>\n(.*?)\n</user_query>", re.DOTALL)
_OBSERVATION = re.compile(r"<latest_observation>\nobservation_id: obs_\d+_\d+\n(.*?)\n</latest_observation>", re.DOTALL)


class TinyOracle:
    """TEST FIXTURE: looks the key up, then answers (by message on odd requests, by submit on even ones)."""

    def __init__(self, task_id: str, uses: frozenset[Capability], protocol: Any) -> None:
        self.requests = {text: (k, key) for k, (text, key, _) in enumerate(task_requests(task_id), 1)}
        self.blocks = tuple(b for b in STATE_BLOCKS if Capability(b) in uses)
        self.protocol = protocol

    async def complete(self, messages: Sequence[ChatMessage], *, json_schema: Any = None) -> Completion:
        prompt = messages[-1].content
        query = _QUERY.search(prompt)
        k, key = self.requests[query.group(1) if query else ""]
        observed = _OBSERVATION.search(prompt)
        if observed is None:
            out = self._render(calls=[{"name": "lookup", "arguments": {"key": key}}])
        elif k % 2 == 0:
            out = self._render(calls=[{"name": "submit", "arguments": {"answer": observed.group(1)}}])
        else:
            out = self._render(message=observed.group(1))
        return Completion(text=out, model="tiny-oracle", finish_reason="stop")

    def _render(self, **parts: Any) -> str:
        return render_output(self.protocol, state_blocks=self.blocks, **parts)


TINY = register_benchmark(Tiny())
