"""FlowState and its baselines behind one small interface.

A method decides two things only: how it builds the model's context C_{k,t} at each step, and what
it keeps between requests. Everything else (parsing, tools, limits, records) is the loop's.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict

from flowstate.chat import ChatMessage
from flowstate.protocol import ParsedOutput, ProtocolMode, protocol_schema
from flowstate.prompts import TaskPrompt, fill, system_prompt, template
from flowstate.repository import IndexEntry, Repository
from flowstate.rules import Rejection
from flowstate.runtime import FlowStateRuntime, Observation, StepEffects
from flowstate.state import StateNode, observation_id


class MethodName(str, Enum):
    FLOWSTATE = "flowstate"
    FULL_CONTEXT = "full_context"


class MethodOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    protocol: ProtocolMode = ProtocolMode.TAGGED
    # Beyond the paper (off for the paper-faithful method): show the model, in its next input,
    # which of its ops and accesses were rejected and why, and what could not be parsed.
    rejection_feedback: bool = False


class StateStats(BaseModel):
    """Sizes of what the model saw at one step."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    active_nodes: int = 0
    active_state_text: str = ""
    index_states: int = 0


class MethodSession(ABC):
    """One episode of one method."""

    name: MethodName
    with_state: bool

    def __init__(self, task: TaskPrompt, options: MethodOptions, tool_names: list[str] | None = None) -> None:
        self.options = options
        self._system = ChatMessage(role="system", content=self._system_prompt(task))
        self.json_schema: dict[str, Any] | None = (
            protocol_schema(with_state=self.with_state, tool_names=tool_names)
            if options.protocol is ProtocolMode.JSON
            else None
        )
        self._query = ""
        self._feedback = ""
        self.last_stats = StateStats()

    # -- the interface the loop drives ------------------------------------------------------
    def begin_request(self, query: str) -> None:
        self._query = query
        self._feedback = ""

    def messages(self, observation: Observation | None) -> list[ChatMessage]:
        """C_{k,t}: the system message and this step's input."""
        slots = self._input_slots()
        slots["observation"] = _render_observation(observation)
        slots["query"] = self._query
        slots["feedback"] = self._feedback
        user = fill(template(self._input_template), slots)
        return [self._system, ChatMessage(role="user", content=user)]

    def apply(self, parsed: ParsedOutput) -> StepEffects:
        """Let the method act on one output; remember what to feed back if that is enabled."""
        effects = self._apply(parsed)
        self._feedback = self._render_feedback(parsed, effects) if self.options.rejection_feedback else ""
        return effects

    @abstractmethod
    def add_observation(self, step: int, content: str, summary: str) -> Observation: ...

    @abstractmethod
    def end_request(self) -> None: ...

    # -- per-method parts ----------------------------------------------------------------------
    _input_template: str

    @abstractmethod
    def _system_prompt(self, task: TaskPrompt) -> str: ...

    @abstractmethod
    def _input_slots(self) -> dict[str, str]: ...

    @abstractmethod
    def _apply(self, parsed: ParsedOutput) -> StepEffects: ...

    def _output_protocol(self, stem: str) -> str:
        return template(f"{stem}_output_{self.options.protocol.value}")

    def _render_feedback(self, parsed: ParsedOutput, effects: StepEffects) -> str:
        rejected: list[Rejection] = [*effects.rejected_ops, *effects.focus_rejected]
        parts = []
        if rejected:
            items = [r.model_dump(mode="json", include={"operation", "state_id", "detail"}) for r in rejected]
            parts.append("<rejected_operations>\n" + _json_lines(items) + "\n</rejected_operations>")
        if parsed.errors:
            parts.append("<protocol_errors>\n" + "\n".join(parsed.errors) + "\n</protocol_errors>")
        return "\n" + "\n\n".join(parts) + "\n" if parts else ""


class FlowStateSession(MethodSession):
    """FlowState: Historical State Index + Active State, edited by ISU and PSA (paper §2)."""

    name = MethodName.FLOWSTATE
    with_state = True
    _input_template = "flowstate_input"

    def __init__(self, task: TaskPrompt, options: MethodOptions, tool_names: list[str] | None = None,
                 repository: Repository | None = None) -> None:
        super().__init__(task, options, tool_names)
        self.runtime = FlowStateRuntime(repository)
        self._index_text = "[]"
        self._index_states = 0

    def _system_prompt(self, task: TaskPrompt) -> str:
        return system_prompt(
            method_rules="\n" + template("flowstate_rules") + "\n",
            output_protocol=self._output_protocol("flowstate"),
            task=task,
        )

    def begin_request(self, query: str) -> None:
        super().begin_request(query)
        self.runtime.begin_request(query)
        index = self.runtime.index()  # G_k is fixed for the whole request: render it once
        self._index_text = _json_lines([_index_entry_json(e) for e in index])
        self._index_states = sum(len(e.states) for e in index)

    def _input_slots(self) -> dict[str, str]:
        active = _json_lines([_active_node_json(n) for n in self.runtime.active_nodes()])
        self.last_stats = StateStats(
            active_nodes=self.runtime.active_size(), active_state_text=active, index_states=self._index_states
        )
        return {"historical_state_index": self._index_text, "active_state": active}

    def _apply(self, parsed: ParsedOutput) -> StepEffects:
        return self.runtime.apply(parsed.state_delta, parsed.state_focus)

    def add_observation(self, step: int, content: str, summary: str) -> Observation:
        return self.runtime.add_observation(step, content, summary)

    def end_request(self) -> None:
        self.runtime.end_request()


class FullContextSession(MethodSession):
    """Full Context: every earlier request and step, in order, in the prompt (appendix B.3).

    The paper gives only the template; here ``{full_trajectory}`` lists each user request, each
    model output's tool calls and message, and each observation with its id. The latest
    observation appears only in ``<latest_observation>`` and joins the history one step later, so
    the serialized history is append-only (prefix-cache friendly).
    """

    name = MethodName.FULL_CONTEXT
    with_state = False
    _input_template = "full_context_input"

    def __init__(self, task: TaskPrompt, options: MethodOptions, tool_names: list[str] | None = None) -> None:
        super().__init__(task, options, tool_names)
        self._entries: list[str] = []
        self._latest: Observation | None = None
        self._request = 0
        self._step = 0

    def _system_prompt(self, task: TaskPrompt) -> str:
        return system_prompt(method_rules="", output_protocol=self._output_protocol("react"), task=task)

    def begin_request(self, query: str) -> None:
        super().begin_request(query)
        self._request += 1
        self._step = 0
        self._entries.append(f"user (request {self._request}): {query}")

    def _input_slots(self) -> dict[str, str]:
        history = "\n".join(self._entries)
        self.last_stats = StateStats(active_state_text=history)
        return {"full_trajectory": history}

    def _apply(self, parsed: ParsedOutput) -> StepEffects:
        self._step += 1
        if self._latest is not None:
            self._entries.append(_render_observation(self._latest))
            self._latest = None
        output = {
            "tool_calls": [c.model_dump(mode="json", include={"name", "arguments"}) for c in parsed.tool_calls],
            "assistant_message": {"content": parsed.assistant_message},
        }
        self._entries.append(
            f"assistant (request {self._request}, step {self._step}): {json.dumps(output, ensure_ascii=False)}"
        )
        return StepEffects()

    def add_observation(self, step: int, content: str, summary: str) -> Observation:
        obs = Observation(obs_id=observation_id(self._request, step), content=content, summary=summary)
        self._latest = obs
        return obs

    def end_request(self) -> None:
        if self._latest is not None:  # a request cut short right after a tool call
            self._entries.append(_render_observation(self._latest))
            self._latest = None


_SESSIONS: dict[MethodName, type[MethodSession]] = {
    MethodName.FLOWSTATE: FlowStateSession,
    MethodName.FULL_CONTEXT: FullContextSession,
}


def new_session(
    method: MethodName | str, task: TaskPrompt, options: MethodOptions | None = None,
    tool_names: list[str] | None = None,
) -> MethodSession:
    """A fresh episode of ``method`` for a task (policy + tool list)."""
    return _SESSIONS[MethodName(method)](task, options or MethodOptions(), tool_names)


# -- serialization helpers ---------------------------------------------------------------------
def _render_observation(observation: Observation | None) -> str:
    if observation is None:
        return "None"
    return f"observation_id: {observation.obs_id}\n{observation.content}"


def _json_lines(items: list[Any]) -> str:
    """A JSON list with one item per line: compact, yet readable and deterministic."""
    if not items:
        return "[]"
    return "[\n" + ",\n".join(json.dumps(i, ensure_ascii=False) for i in items) + "\n]"


def _index_entry_json(entry: IndexEntry) -> dict[str, Any]:
    return entry.model_dump(mode="json")


def _active_node_json(node: StateNode) -> dict[str, Any]:
    return {
        "state_id": node.state_id,
        "type": node.type.value,
        "related_states": [{"state_id": r.state_id, "rel": r.rel.value} for r in node.refs],
        "summary": node.summary,
        "value": node.value,
    }
