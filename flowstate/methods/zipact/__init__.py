"""ZipAct (Pan et al., 2026) in the B.3 "State Tracking" prompt, and ZipAct+BM25 ("State Tracking +
Memory").

The agent never sees the history: ``<agent_status>`` holds one JSON state (goal_state, world_state
with the benchmark's fields, constraint_state) and the latest observation. By default
(``updater: inline``, the paper's B.3 protocol) the agent rewrites the whole state in an
``execution_state`` block before its tool calls, one model call per step. ``updater: separate`` is
upstream's own two-call mode: after each step the method's own model (the memory role; upstream
samples it at temperature 0 with at most 800 completion tokens) gets the previous state, the last
action and the new observation and returns the updated state. Either way:

- the state persists across requests; a new request reaches the separate updater as the
  observation of its first step (inline, the agent sees it in ``<user_query>``);
- ``attempted_actions`` is kept by code, as upstream keeps it: each tool call (name and arguments)
  is appended once and overrides the list the model wrote;
- an update that does not parse (or is empty) keeps the old state; every update is a
  ``state_update`` method record with the state before and after.
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar, Literal, TypeVar

from flowstate.chat import ChatMessage, estimate_tokens
from flowstate.methods.base import (
    Capability,
    EpisodeShape,
    MethodCallers,
    MethodOptions,
    MethodSession,
    OwnCalls,
    StateStats,
)
from flowstate.methods.bm25 import Recall, RetrievalOptions
from flowstate.methods.memory_system import NOTHING_RETRIEVED
from flowstate.methods.zipact.prompts import (
    actor_rules,
    initial_state,
    inline_rules,
    updater_system,
    updater_user,
    world_state,
)
from flowstate.prompts import TaskPrompt, system_prompt
from flowstate.protocol import ParsedOutput
from flowstate.records import RequestOutcome, RequestStart
from flowstate.runtime import Observation, StepEffects
from flowstate.state import observation_id

Updater = Literal["inline", "separate"]
NO_ACTION = "None"  # the last action before a task's first request (upstream prints Python's None)


class StateTrackingOptions(MethodOptions):
    """ZipAct's settings, for both ZipAct methods."""

    updater: Updater = "inline"


class ZipActOptions(StateTrackingOptions):
    name: Literal["zipact"] = "zipact"


StateTrackingOptionsT = TypeVar("StateTrackingOptionsT", bound=StateTrackingOptions)


class ZipActSession(MethodSession[StateTrackingOptionsT]):
    uses = frozenset({Capability.EXECUTION_STATE, Capability.MEMORY_MODEL})
    record_kinds: ClassVar[tuple[str, ...]] = ("state_update",)  # ZipAct+BM25 adds its own
    input_template = "state_tracking_input"

    @classmethod
    def capabilities(cls, options: StateTrackingOptionsT) -> frozenset[Capability]:
        """Inline, the state is a block of the agent's output; separate, the method's own model updates it."""
        updater = Capability.MEMORY_MODEL if options.updater == "separate" else Capability.EXECUTION_STATE
        return (cls.uses - {Capability.EXECUTION_STATE, Capability.MEMORY_MODEL}) | {updater}

    @classmethod
    def own_calls(cls, options: StateTrackingOptionsT, task: TaskPrompt, shape: EpisodeShape) -> OwnCalls:
        """Inline, none; separate, one update per request and per observation, each with the updater's
        prompt, the state and the observation, and the state back."""
        if options.updater != "separate":
            return OwnCalls()
        world = world_state(task.benchmark, task.domain)
        empty = initial_state(world)
        fixed = estimate_tokens(updater_system(world)) + estimate_tokens(updater_user(empty, NO_ACTION, ""))
        per_call = fixed + shape.entry_tokens + estimate_tokens(json.dumps(empty, indent=2))
        calls = shape.requests + shape.observations
        return OwnCalls(memory=calls, memory_tokens=calls * per_call)

    def __init__(self, task: TaskPrompt, options: StateTrackingOptionsT, tool_names: list[str] | None = None,
                 callers: MethodCallers = MethodCallers()) -> None:
        super().__init__(task, options, tool_names, callers)
        self.world = world_state(task.benchmark, task.domain)
        self.state: dict[str, Any] = initial_state(self.world)
        self._attempted: list[str] = []
        self._last_action = NO_ACTION
        self._request = 0

    @property
    def separate(self) -> bool:
        return self.options.updater == "separate"

    def system_prompt(self, task: TaskPrompt) -> str:
        world = world_state(task.benchmark, task.domain)
        rules = actor_rules(world) if self.options.updater == "separate" else inline_rules(world)
        stem = "react" if self.options.updater == "separate" else "state_tracking"
        return system_prompt(method_rules="\n## state_tracking_rules\n\n" + rules + "\n",
                             output_protocol=self.output_protocol(stem), task=task)

    async def begin_request(self, request: RequestStart) -> None:
        await super().begin_request(request)
        self._request = request.index
        if self.separate:
            await self._update_separately(request.query)

    def input_slots(self) -> dict[str, str]:
        status = json.dumps(self.state, indent=2, ensure_ascii=False)
        self.last_stats = StateStats(active_state_text=status)
        return {"execution_state": status}

    def apply_output(self, parsed: ParsedOutput) -> StepEffects:
        actions = [f"{c.name}({json.dumps(c.arguments, ensure_ascii=False, sort_keys=True)})" for c in parsed.tool_calls]
        self._attempted += [a for a in dict.fromkeys(actions) if a not in self._attempted]
        self._last_action = "; ".join(actions) or f"respond: {parsed.assistant_message or ''}"
        if not self.separate:
            self._apply(parsed.execution_state, "inline", None if parsed.execution_state is not None
                        else "; ".join(parsed.errors) or "no execution_state block")
        return StepEffects()

    async def add_observation(self, step: int, content: str, summary: str) -> Observation:
        if self.separate:
            await self._update_separately(content)
        return Observation(obs_id=observation_id(self._request, step), content=content, summary=summary)

    async def end_request(self, outcome: RequestOutcome) -> None:
        return None  # the state persists into the next request

    async def _update_separately(self, observation: str) -> None:
        """U(S_{t-1}, a_{t-1}, o_t): the method's own model returns the updated state."""
        messages = [ChatMessage(role="system", content=updater_system(self.world)),
                    ChatMessage(role="user", content=updater_user(self.state, self._last_action, observation))]
        assert self.callers.memory is not None  # the separate updater declares it: checked by new_session
        reply = await self.callers.memory.complete(messages)
        new = parse_state(reply.text)
        self._apply(new, "separate", None if new is not None else "the updater's reply is not a JSON object")

    def _apply(self, new: dict[str, Any] | None, updater: str, error: str | None) -> None:
        before = self.state
        if new:
            constraints = new.get("constraint_state")
            new["constraint_state"] = {**(constraints if isinstance(constraints, dict) else {}),
                                       "attempted_actions": list(self._attempted)}
            self.state = new
        else:
            self.state = {**before, "constraint_state": {**before.get("constraint_state", {}),
                                                         "attempted_actions": list(self._attempted)}}
        self.record("state_update", {"updater": updater, "parsed": bool(new), "error": error if not new else None,
                                     "before": before, "after": self.state})


_JSON_FENCE = re.compile(r"```json\s*(.*?)```", re.DOTALL)
_ANY_FENCE = re.compile(r"```\s*(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


def parse_state(text: str) -> dict[str, Any] | None:
    """The updater's reply as upstream reads it: the first ```json block, else the first ``` block,
    else the whole text; trailing commas removed; a JSON object, or None."""
    match = _JSON_FENCE.search(text) or _ANY_FENCE.search(text)
    body = _TRAILING_COMMA.sub(r"\1", (match.group(1) if match else text).strip())
    try:
        value = json.loads(body)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


class ZipActBM25Options(StateTrackingOptions, RetrievalOptions):
    name: Literal["zipact_bm25"] = "zipact_bm25"


class ZipActBM25Session(ZipActSession[ZipActBM25Options]):
    """ZipAct plus BM25 over the entries of earlier requests, retrieved once per request into
    ``<memory>`` (B.3 "State Tracking + Memory"): retrieved when a request begins (after the
    benchmark's initial memory is stored), the entries stored when it ends."""

    uses = ZipActSession.uses | {Capability.MEMORY}
    record_kinds = ("state_update", "retrieval", "write")
    input_template = "state_tracking_memory_input"

    def __init__(self, task: TaskPrompt, options: ZipActBM25Options, tool_names: list[str] | None = None,
                 callers: MethodCallers = MethodCallers()) -> None:
        super().__init__(task, options, tool_names, callers)
        self.recall = Recall(self.record, options)
        self.retrieved = NOTHING_RETRIEVED

    async def begin_request(self, request: RequestStart) -> None:
        await super().begin_request(request)
        self.recall.store(request.memory_entries)
        self.retrieved = self.recall.retrieve(request.memory_query)

    def input_slots(self) -> dict[str, str]:
        return {**super().input_slots(), "retrieved_memory": self.retrieved}

    async def end_request(self, outcome: RequestOutcome) -> None:
        await super().end_request(outcome)
        self.recall.store(outcome.memory_entries)
