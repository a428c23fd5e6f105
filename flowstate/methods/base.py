"""What every method is: an options model, the capabilities it uses, and one session per episode.

A method decides how it builds the model's context C_{k,t} at each step, what it does with each
output, and what it keeps between requests. Everything else (parsing, tools, limits, records) is
the loop's. The loop never asks which method it drives: what a method uses (the state delta, the
focus, a model or embeddings of its own) is a capability it declares, and the output protocol and
its JSON schema follow from those.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from flowstate.chat import ChatMessage, Embedder, Policy
from flowstate.methods.render import json_lines, render_observation
from flowstate.prompts import TaskPrompt, fill, template
from flowstate.protocol import STATE_BLOCKS, ParsedOutput, ProtocolMode, protocol_schema
from flowstate.records import MethodRecord, RequestOutcome, RequestStart, StepClock
from flowstate.repository import RepositoryExport
from flowstate.rules import Rejection
from flowstate.runtime import Observation, StepEffects


class Capability(str, Enum):
    """What a method uses beyond the shared ReAct protocol (tool calls and a message)."""

    STATE_DELTA = "state_delta"  # ISU: the model edits the Active State
    STATE_FOCUS = "state_focus"  # PSA: the model discloses historical states
    EXECUTION_STATE = "execution_state"  # State Tracking: the model rewrites one JSON state object each step
    MEMORY = "memory"  # the method stores memory entries and retrieves with memory queries (the benchmark's)
    MEMORY_MODEL = "memory_model"  # the method calls a model of its own (the memory role)
    EMBEDDINGS = "embeddings"  # the method embeds text (the embeddings role)


class MethodOptions(BaseModel):
    """Options every method has; a method's own options model extends it with ``name: Literal[...]``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    protocol: ProtocolMode = ProtocolMode.TAGGED
    # Beyond the paper (off for the paper-faithful method): show the model, in its next input,
    # which of its ops and accesses were rejected and why, and what could not be parsed.
    rejection_feedback: bool = False
    # Name in results; defaults to the name plus any non-default shared option.
    label: str | None = None

    @property
    def display(self) -> str:
        if self.label:
            return self.label
        suffix = ("-json" if self.protocol is ProtocolMode.JSON else "") + ("-feedback" if self.rejection_feedback else "")
        return self.name + suffix

    def identity(self) -> dict[str, Any]:
        """What defines the method's behaviour (part of cell and episode ids): every option but the label."""
        return self.model_dump(mode="json", exclude={"label"})


# A session's options: its method's own model (what the session reads beyond the shared options).
OptionsT = TypeVar("OptionsT", bound=MethodOptions)


@dataclass(frozen=True)
class MethodCallers:
    """The models a session may call, as it declared them (see :class:`Capability`), and the
    agent's window."""

    memory: Policy | None = None
    embeddings: Embedder | None = None
    # Tokens the agent's context window leaves for a prompt (its length minus the completion
    # budget), where the deployment states its length; methods that trim their history use it.
    agent_prompt_tokens: int | None = None


@dataclass(frozen=True)
class EpisodeShape:
    """One episode's size as a dry run guesses it before it runs (the benchmark's guess for its task):
    what the calls a method makes of its own models follow from."""

    requests: float
    steps: float  # the agent's model calls
    observations: float  # steps whose tool calls returned an observation
    memory_entries: float  # the benchmark's memory entries, its initial memory included
    entry_tokens: float  # tokens of one memory entry or observation


@dataclass(frozen=True)
class OwnCalls:
    """The calls a method makes of its own models in one episode (the agent's are the loop's)."""

    memory: float = 0.0
    memory_tokens: float = 0.0  # prompt and completion tokens of those calls together
    embeddings: float = 0.0
    embedding_tokens: float = 0.0


class StateStats(BaseModel):
    """Sizes of what the model saw at one step."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    active_nodes: int = 0
    active_state_text: str = ""
    index_states: int = 0


class MethodSession(ABC, Generic[OptionsT]):
    """One episode of one method. The loop drives it: begin a request, build the context for each
    step, apply each output, add each observation, end the request with its outcome. Generic in its
    method's options model, which :func:`~flowstate.methods.register_method` pairs it with."""

    uses: ClassVar[frozenset[Capability]] = frozenset()
    # Kinds of :class:`MethodRecord` the method writes (to the generic method-records table).
    record_kinds: ClassVar[tuple[str, ...]] = ()
    input_template: ClassVar[str]

    def __init__(self, task: TaskPrompt, options: OptionsT, tool_names: list[str] | None = None,
                 callers: MethodCallers = MethodCallers()) -> None:
        self.options = options
        self.used = self.capabilities(options)
        self.callers = callers
        self.clock = StepClock()
        self.records: list[MethodRecord] = []
        self._system = ChatMessage(role="system", content=self.system_prompt(task))
        self.json_schema: dict[str, Any] | None = (
            protocol_schema(state_blocks=self.state_blocks(), tool_names=tool_names)
            if options.protocol is ProtocolMode.JSON
            else None
        )
        self._query = ""
        self._feedback = ""
        self.last_stats = StateStats()

    @property
    def system_message(self) -> ChatMessage:
        """The system message: the same at every step of the episode."""
        return self._system

    @classmethod
    def capabilities(cls, options: OptionsT) -> frozenset[Capability]:
        """What the method uses with these options (by default, what its class declares)."""
        return cls.uses

    @classmethod
    def own_calls(cls, options: OptionsT, task: TaskPrompt, shape: EpisodeShape) -> OwnCalls:
        """The calls of the method's own models in an episode of ``shape``, for the dry run's
        estimate: none unless the method declares them (a method that calls a model overrides this)."""
        return OwnCalls()

    def state_blocks(self) -> tuple[str, ...]:
        """The state blocks of this method's output protocol, in protocol order."""
        return tuple(block for block in STATE_BLOCKS if Capability(block) in self.used)

    # -- the interface the loop drives ------------------------------------------------------
    async def begin_request(self, request: RequestStart) -> None:
        self._query = request.query
        self._feedback = ""

    async def messages(self, observation: Observation | None) -> list[ChatMessage]:
        """C_{k,t}: the system message and this step's input."""
        return self.compose(self.input_slots(), observation)

    def compose(self, slots: dict[str, str], observation: Observation | None) -> list[ChatMessage]:
        """The messages for the method's slots and this step's observation, query and feedback."""
        slots = dict(slots)
        slots["observation"] = render_observation(observation)
        slots["query"] = self._query
        slots["feedback"] = self._feedback
        user = fill(self.input_template_text(), slots)
        return [self._system, ChatMessage(role="user", content=user)]

    async def apply(self, parsed: ParsedOutput) -> StepEffects:
        """Let the method act on one output; remember what to feed back if that is enabled."""
        effects = self.apply_output(parsed)
        self._feedback = self._render_feedback(parsed, effects) if self.options.rejection_feedback else ""
        return effects

    @abstractmethod
    async def add_observation(self, step: int, content: str, summary: str) -> Observation: ...

    @abstractmethod
    async def end_request(self, outcome: RequestOutcome) -> None: ...

    async def aclose(self) -> None:
        """Release what the session holds outside memory (files, stores); the loop calls it once
        the episode ends, however it ends."""

    def final_state(self) -> RepositoryExport | None:
        """The state the method kept at the end of the episode, if it keeps a repository."""
        return None

    def record(self, kind: str, payload: Any) -> None:
        """Keep a record of a declared kind at the current request and step."""
        if kind not in self.record_kinds:
            raise ValueError(f"{type(self).__name__} declares no record kind {kind!r} (declared: {self.record_kinds})")
        self.records.append(MethodRecord(kind=kind, request=self.clock.request, step=self.clock.step, payload=payload))

    # -- per-method parts ----------------------------------------------------------------------
    @abstractmethod
    def system_prompt(self, task: TaskPrompt) -> str: ...

    @abstractmethod
    def input_slots(self) -> dict[str, str]: ...

    @abstractmethod
    def apply_output(self, parsed: ParsedOutput) -> StepEffects: ...

    def input_template_text(self) -> str:
        """The input prompt's template: ``prompts/<input_template>.txt`` (a plug-in may bring its own)."""
        return template(self.input_template)

    def output_protocol(self, stem: str) -> str:
        return template(f"{stem}_output_{self.options.protocol.value}")

    def _render_feedback(self, parsed: ParsedOutput, effects: StepEffects) -> str:
        rejected: list[Rejection] = [*effects.rejected_ops, *effects.focus_rejected]
        parts = []
        if rejected:
            items = [r.model_dump(mode="json", include={"operation", "state_id", "detail"}) for r in rejected]
            parts.append("<rejected_operations>\n" + json_lines(items) + "\n</rejected_operations>")
        if parsed.errors:
            parts.append("<protocol_errors>\n" + "\n".join(parsed.errors) + "\n</protocol_errors>")
        return "\n" + "\n\n".join(parts) + "\n" if parts else ""
