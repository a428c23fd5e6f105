"""TEST FIXTURES: a third benchmark ("tiny") and a third method ("last_n"), registered from outside
``pipeline/`` and ``flowstate/``, to prove that each is one module.

tiny: two tasks, each a fixed list of requests answered by looking a key up (tool ``lookup``) and
answering with a message or with the tool ``submit`` (which ends the request, as a purchase would);
graded by exact match, request by request. Its oracle answers exactly, in any method's protocol.
A task ``canary-<anything>`` (named in a cell's ``tasks``) asks t1's questions, the first with a
code to remember (:func:`canary_code`, derived from the task id so that no id or cell option holds
it): what must never reach another episode.

last_n: the ReAct protocol over the last N lines of the trajectory, plus the memory entries the
benchmark supplies (retrieved with the benchmark's memory query); it records both.

recall: like last_n, but what it stores is written by its own model (the memory role) and what it
shows is retrieved by embedding similarity (the embeddings role): the auxiliary calls that are
recorded and counted.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import Field

from flowstate import (
    Capability,
    ChatMessage,
    Completion,
    Embedder,
    MethodCallers,
    MethodOptions,
    MethodPlugin,
    MethodSession,
    Observation,
    ParsedOutput,
    Policy,
    RequestOutcome,
    RequestStart,
    StepEffects,
    TaskPrompt,
    ToolCall,
    ToolResult,
    observation_id,
    register_method,
)
from flowstate.methods.render import output_line, render_observation, request_line
from flowstate.prompts import system_prompt
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


class WindowOptions(MethodOptions):
    """What last_n and recall share: how many trajectory lines they show."""

    window: int = Field(default=4, ge=1)


class LastNOptions(WindowOptions):
    name: Literal["last_n"] = "last_n"


LAST_N_INPUT = ("<memory>\n{memory}\n</memory>\n<recent_messages>\n{recent}\n</recent_messages>\n{feedback}\n"
                "<latest_observation>\n{observation}\n</latest_observation>\n\n<user_query>\n{query}\n</user_query>")


class LastNSession(MethodSession):
    """The last ``window`` trajectory lines of the episode, and every memory entry stored so far."""

    uses = frozenset({Capability.MEMORY})
    record_kinds: ClassVar[tuple[str, ...]] = ("window", "retrieval")
    options: WindowOptions

    def __init__(self, task: TaskPrompt, options: MethodOptions, tool_names: list[str] | None = None,
                 callers: MethodCallers = MethodCallers()) -> None:
        super().__init__(task, options, tool_names, callers)
        self.lines: list[str] = []
        self.memory: list[str] = []
        self._latest: Observation | None = None
        self._request = 0

    def system_prompt(self, task: TaskPrompt) -> str:
        return system_prompt(method_rules="", output_protocol=self.output_protocol("react"), task=task)

    def input_template_text(self) -> str:
        return LAST_N_INPUT

    async def begin_request(self, request: RequestStart) -> None:
        await super().begin_request(request)
        self._request = request.index
        self.lines.append(request_line(request.index, request.query))
        self.record("retrieval", {"query": request.memory_query, "entries": len(self.memory)})

    def input_slots(self) -> dict[str, str]:
        recent = self.lines[-self.options.window:]
        self.record("window", {"kept": len(recent), "dropped": len(self.lines) - len(recent)})
        return {"memory": "\n".join(self.memory) or "None", "recent": "\n".join(recent)}

    def apply_output(self, parsed: ParsedOutput) -> StepEffects:
        if self._latest is not None:
            self.lines.append(render_observation(self._latest))
            self._latest = None
        self.lines.append(output_line(self._request, self.clock.step, parsed.tool_calls, parsed.assistant_message))
        return StepEffects()

    async def add_observation(self, step: int, content: str, summary: str) -> Observation:
        self._latest = Observation(obs_id=observation_id(self._request, step), content=content, summary=summary)
        return self._latest

    async def end_request(self, outcome: RequestOutcome) -> None:
        self._latest = None
        self.memory.extend(outcome.memory_entries)


class RecallOptions(WindowOptions):
    name: Literal["recall"] = "recall"
    top_k: int = Field(default=1, ge=1)


class RecallSession(LastNSession):
    """Stores a note its memory model writes about each request; shows the notes closest to the query."""

    uses = frozenset({Capability.MEMORY, Capability.MEMORY_MODEL, Capability.EMBEDDINGS})
    record_kinds = ("window", "retrieval", "write")
    options: RecallOptions

    def __init__(self, task: TaskPrompt, options: MethodOptions, tool_names: list[str] | None = None,
                 callers: MethodCallers = MethodCallers()) -> None:
        super().__init__(task, options, tool_names, callers)
        self.vectors: list[list[float]] = []
        self.shown: list[str] = []

    @property
    def memory_model(self) -> Policy:
        assert self.callers.memory is not None  # new_session gives a session the roles it uses
        return self.callers.memory

    @property
    def embedder(self) -> Embedder:
        assert self.callers.embeddings is not None  # new_session gives a session the roles it uses
        return self.callers.embeddings

    async def begin_request(self, request: RequestStart) -> None:
        await MethodSession.begin_request(self, request)
        self._request = request.index
        self.lines.append(request_line(request.index, request.query))
        self.shown = []
        if self.memory:
            [query] = (await self.embedder.embed([request.memory_query])).vectors
            scores = [sum(a * b for a, b in zip(query, v, strict=True)) for v in self.vectors]
            best = sorted(range(len(scores)), key=lambda i: -scores[i])[: self.options.top_k]
            self.shown = [self.memory[i] for i in best]
            self.record("retrieval", {"query": request.memory_query, "ids": best, "scores": [scores[i] for i in best]})

    def input_slots(self) -> dict[str, str]:
        return {**super().input_slots(), "memory": "\n".join(self.shown) or "None"}

    async def end_request(self, outcome: RequestOutcome) -> None:
        self._latest = None
        entries = "\n".join(outcome.memory_entries)
        note = await self.memory_model.complete([ChatMessage(role="user", content=f"note: {entries}")])
        [vector] = (await self.embedder.embed([note.text])).vectors
        self.memory.append(note.text)
        self.vectors.append(vector)
        self.record("write", {"note": note.text})


TINY = register_benchmark(Tiny())
register_method(LastNOptions, LastNSession)
register_method(RecallOptions, RecallSession)
