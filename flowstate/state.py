"""Typed state nodes, their relations, and the delta ops that edit them (paper §2.1, appendix B.2)."""

from __future__ import annotations

import re
from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)


class StateType(str, Enum):
    """The five state types of appendix B.2, always written out in singular form."""

    PREFERENCE = "preference"
    KNOWLEDGE = "knowledge"
    ATTRIBUTE = "attribute"
    JUDGEMENT = "judgement"
    ARTIFACT = "artifact"

    @classmethod
    def parse(cls, value: object) -> StateType:
        """Accept the singular and plural spellings the paper uses (and ``judgment``)."""
        if isinstance(value, StateType):
            return value
        if not isinstance(value, str):
            raise ValueError(f"state type must be a string, got {type(value).__name__}")
        key = value.strip().lower()
        found = _TYPE_SPELLINGS.get(key)
        if found is None:
            allowed = ", ".join(t.value for t in cls)
            raise ValueError(f"unknown state type {value!r}; expected one of {allowed}")
        return found


_TYPE_SPELLINGS: dict[str, StateType] = {}
for _t in StateType:
    _TYPE_SPELLINGS[_t.value] = _t
    _TYPE_SPELLINGS[_t.value + "s"] = _t
_TYPE_SPELLINGS["judgment"] = _TYPE_SPELLINGS["judgments"] = StateType.JUDGEMENT

#: Every spelling a model may use for a state type (for JSON schemas and prompts).
STATE_TYPE_SPELLINGS: tuple[str, ...] = tuple(_TYPE_SPELLINGS)


class RelationType(str, Enum):
    SUPPORTS = "supports"
    DERIVES = "derives"
    FOLLOWS = "follows"
    SUPERSEDES = "supersedes"


class Origin(str, Enum):
    """Who made a node: the model (ISU), a tool (a raw observation persisted because a retained
    state referenced it), or a rule of the method (e.g. a node built from a request's response)."""

    MODEL = "model"
    TOOL = "tool"
    RULE = "rule"


_OBSERVATION_ID = re.compile(r"obs_(\d+)_(\d+)")


def observation_id(request: int, step: int) -> str:
    """The id the runtime gives the observation produced by step ``step`` of request ``request``."""
    return f"obs_{request}_{step}"


def is_observation_id(state_id: str) -> bool:
    """Ids of the form ``obs_<k>_<t>`` are reserved for observations."""
    return _OBSERVATION_ID.fullmatch(state_id) is not None


#: A state type field that accepts every spelling of :meth:`StateType.parse`.
AnyStateType = Annotated[StateType, BeforeValidator(StateType.parse)]
#: Models write the type as ``state_set`` (the paper's protocol) or, often, as ``type``.
_STATE_SET = AliasChoices("state_set", "type")


class Ref(BaseModel):
    """A directed relation from the node that carries it to ``state_id``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rel: RelationType
    state_id: str


class StateNode(BaseModel):
    """One state node. Frozen: historical nodes must never change."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    state_id: str
    type: AnyStateType
    summary: str
    value: Any = None
    refs: tuple[Ref, ...] = ()
    source_request: int
    origin: Origin = Origin.MODEL


class AddOp(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    operation: Literal["add"]
    state_id: str = Field(min_length=1)
    state_set: AnyStateType = Field(validation_alias=_STATE_SET)
    summary: str = ""
    value: Any = Field(default_factory=dict)
    refs: tuple[Ref, ...] = ()


class UpdateOp(BaseModel):
    """Replaces the given fields of a current-request node; omitted fields keep their value."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    operation: Literal["update"]
    state_id: str = Field(min_length=1)
    state_set: AnyStateType | None = Field(default=None, validation_alias=_STATE_SET)
    summary: str | None = None
    value: Any = None
    refs: tuple[Ref, ...] | None = None

    def changes(self) -> dict[str, Any]:
        """The node fields this op sets: those the model wrote (``null`` counts only for value)."""
        written = {
            "type": self.state_set,
            "summary": self.summary,
            "refs": self.refs,
        }
        changes = {k: v for k, v in written.items() if v is not None}
        if "value" in self.model_fields_set:
            changes["value"] = self.value
        return changes

    @model_serializer(mode="wrap")
    def _only_written_fields(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Serialize only what the model wrote, so a stored op re-validates to the same changes."""
        data = handler(self)
        return {k: v for k, v in data.items() if k in self.model_fields_set or k in ("operation", "state_id")}


class RemoveOp(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    operation: Literal["remove"]
    state_id: str = Field(min_length=1)


DeltaOp = Annotated[AddOp | UpdateOp | RemoveOp, Field(discriminator="operation")]


class FocusRequest(BaseModel):
    """A PSA access request: disclose ``target_id`` (and say why)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    target_id: str = Field(validation_alias=AliasChoices("target_id", "state_id", "id"))
    reason: str = ""
