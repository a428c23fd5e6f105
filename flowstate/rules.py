"""The execution rules P of appendix B.4: Validate_upd for ISU and Validate_acc for PSA.

Rules are pure checks against a :class:`RuleView` of the episode; they never mutate anything.
Each failed check yields a machine-readable ``reason`` code (for SQL) and a sentence for the model.
"""

from __future__ import annotations

from collections.abc import Set
from enum import Enum
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from flowstate.state import AddOp, DeltaOp, Ref, RemoveOp, UpdateOp, is_observation_id


class Reason(str, Enum):
    MALFORMED = "malformed"
    ID_IN_USE = "id_in_use"
    RESERVED_ID = "reserved_id"
    NOT_IN_ACTIVE_STATE = "not_in_active_state"
    NOT_CURRENT_REQUEST = "not_current_request"
    UNKNOWN_REF = "unknown_ref"
    SELF_REF = "self_ref"
    NOT_ACCESSIBLE = "not_accessible"


class Rejection(BaseModel):
    """An op or access excluded by the rules, with why."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    operation: str  # add / update / remove / focus, or what the model wrote
    state_id: str
    reason: Reason
    detail: str


class RuleView(Protocol):
    """What the rules may look at: S_k,t, G_k and the current request's observations."""

    def is_visible(self, state_id: str) -> bool:
        """In S_k,t (created this request, or disclosed)."""
        ...

    def is_current(self, state_id: str) -> bool:
        """Created by the model in the current request and still present."""
        ...

    def in_index(self, state_id: str) -> bool:
        """In IDs(G_k)."""
        ...

    def in_repository(self, state_id: str) -> bool: ...

    def is_current_observation(self, state_id: str) -> bool:
        """An observation produced so far in the current request."""
        ...

    def tool_refs(self) -> Set[str]:
        """ToolRefs(S_k,t): observation ids referenced by states in the Active State."""
        ...


def check_delta_op(op: DeltaOp, view: RuleView) -> Rejection | None:
    """Validate_upd for one op, against the Active State as earlier ops of the delta left it."""
    sid = op.state_id
    if isinstance(op, AddOp):
        if is_observation_id(sid):
            return _reject(op, Reason.RESERVED_ID, "ids of the form obs_<k>_<t> are reserved for tool observations; "
                           f"choose another id than {sid!r}")
        if view.is_visible(sid) or view.in_repository(sid) or view.is_current_observation(sid):
            return _reject(op, Reason.ID_IN_USE, f"state id {sid!r} is already used in this episode; add needs a new id")
    elif isinstance(op, UpdateOp | RemoveOp):
        if not view.is_visible(sid):
            return _reject(op, Reason.NOT_IN_ACTIVE_STATE, f"{sid!r} is not in the Active State")
        if not view.is_current(sid):
            return _reject(op, Reason.NOT_CURRENT_REQUEST, f"{sid!r} was not created in the current request and cannot "
                           "be changed; add a new state that refs it")
    refs = op.refs if isinstance(op, AddOp | UpdateOp) else None
    for ref in refs or ():
        rejection = _check_ref(op, ref, view)
        if rejection is not None:
            return rejection
    return None


def _check_ref(op: DeltaOp, ref: Ref, view: RuleView) -> Rejection | None:
    target = ref.state_id
    if target == op.state_id:
        return _reject(op, Reason.SELF_REF, f"{op.state_id!r} cannot ref itself")
    known = (
        view.is_visible(target)
        or view.in_index(target)
        or view.is_current_observation(target)
        or target in view.tool_refs()
    )
    if not known:
        return _reject(op, Reason.UNKNOWN_REF, f"ref target {target!r} is not a visible state, an index entry or an "
                       "available observation id")
    return None


def _reject(op: DeltaOp, reason: Reason, detail: str) -> Rejection:
    return Rejection(operation=op.operation, state_id=op.state_id, reason=reason, detail=detail)


def check_access(target_id: str, view: RuleView) -> Rejection | None:
    """Validate_acc for one requested id: it must be in IDs(G_k) ∪ ToolRefs(S_k,t)."""
    if view.in_index(target_id) or target_id in view.tool_refs():
        return None
    if view.is_visible(target_id):
        return None  # already visible: accepted, discloses nothing
    return Rejection(
        operation="focus",
        state_id=target_id,
        reason=Reason.NOT_ACCESSIBLE,
        detail=f"{target_id!r} is neither in the Historical State Index nor a tool result referenced by the Active State",
    )
