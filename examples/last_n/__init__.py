"""Two methods, as a plug-in of your own: ``last_n`` and ``recall``, in one folder.

last_n: the ReAct protocol over the last N lines of the trajectory, plus the memory entries the
benchmark supplies (retrieved with the benchmark's memory query); it records both.

recall: like last_n, but what it stores is written by its own model (the ``memory`` role) and what it
shows is retrieved by embedding similarity (the ``embeddings`` role): the auxiliary calls that are
recorded and counted.

What makes each a method (see ``flowstate/methods/base.py``): an options model with
``name: Literal[...]``, a :class:`~flowstate.MethodSession` generic in it that declares what it uses
(capabilities) and builds its context step by step, and :func:`~flowstate.register_method` when the
module is imported. No part of the pipeline names them.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from flowstate import (
    Capability,
    ChatMessage,
    Embedder,
    EpisodeShape,
    MethodCallers,
    MethodOptions,
    MethodSession,
    Observation,
    OwnCalls,
    ParsedOutput,
    Policy,
    RequestOutcome,
    RequestStart,
    StepEffects,
    TaskPrompt,
    observation_id,
    register_method,
)
from flowstate.methods.render import output_line, render_observation, request_line
from flowstate.prompts import system_prompt


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

    @classmethod
    def own_calls(cls, options: MethodOptions, task: TaskPrompt, shape: EpisodeShape) -> OwnCalls:
        """What the dry run estimates: a note per request (its entries in the prompt), each embedded,
        and the query of every request after the first."""
        notes, entries = shape.requests, shape.memory_entries * shape.entry_tokens
        embeddings = notes + max(shape.requests - 1, 0)
        return OwnCalls(memory=notes, memory_tokens=entries, embeddings=embeddings,
                        embedding_tokens=embeddings * shape.entry_tokens)

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


register_method(LastNOptions, LastNSession)
register_method(RecallOptions, RecallSession)
