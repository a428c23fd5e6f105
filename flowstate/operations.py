"""The paper's operations by name (§2.2, §2.3, Algorithm 1), as functions of the state they read.

One step is two halves:

- **ISU** (eq. 1): ``validate_upd`` keeps the admissible ops of the candidate delta ΔS_k,t and
  ``commit`` applies them to the current request's states, giving S⁺_k,t;
- **PSA** (eq. 2): ``validate_acc`` keeps the admissible ids of the access set R_k,t and
  ``disclose`` returns the content of those not yet visible, which join S⁺_k,t to give S_k,t+1.

At the end of a request, ``persist`` (eq. 4) adds the request, its retained states and the raw
observations they reference to M_k, and ``index`` gives G_k+1 = Index(M_k+1). Both validations
read S_k,t as it was before the step (an access cannot see the same step's delta); the ops of one
delta are checked in order, each against the state the earlier accepted ops left.
:class:`flowstate.runtime.FlowStateRuntime` holds the state between steps and calls these.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from flowstate.repository import IndexEntry, Repository, RequestRecord
from flowstate.rules import Reason, Rejection, check_access, check_delta_op
from flowstate.state import (
    AddOp,
    DeltaOp,
    FocusRequest,
    Origin,
    RemoveOp,
    StateNode,
    StateType,
    UpdateOp,
    is_observation_id,
)

_DELTA_OP = TypeAdapter(DeltaOp)


class Observation(BaseModel):
    """A raw tool observation of the current request, referencable as evidence by its id."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    obs_id: str
    content: str
    summary: str


@dataclass(frozen=True)
class ActiveState:
    """S_k,t and what the rules consult beside it: the current request's states (created this
    request), the disclosed historical states, M_k, and the current request's observations. It
    implements :class:`flowstate.rules.RuleView`."""

    request: int
    repository: Repository
    current: Mapping[str, StateNode] = field(default_factory=dict)
    disclosed: Mapping[str, StateNode] = field(default_factory=dict)
    observations: Mapping[str, Observation] = field(default_factory=dict)

    def nodes(self) -> Iterable[StateNode]:
        """S_k,t in a stable order: disclosed historical states first, then current ones."""
        yield from self.disclosed.values()
        yield from self.current.values()

    def is_visible(self, state_id: str) -> bool:
        return state_id in self.current or state_id in self.disclosed

    def is_current(self, state_id: str) -> bool:
        return state_id in self.current

    def in_index(self, state_id: str) -> bool:
        return self.repository.is_indexed(state_id)

    def in_repository(self, state_id: str) -> bool:
        return state_id in self.repository

    def is_current_observation(self, state_id: str) -> bool:
        return state_id in self.observations

    def tool_refs(self) -> Set[str]:
        return {
            ref.state_id
            for node in self.nodes()
            for ref in node.refs
            if is_observation_id(ref.state_id) and (ref.state_id in self.repository or ref.state_id in self.observations)
        }


class UpdateValidation(BaseModel):
    """What Validate_upd made of a candidate delta: ΔŜ_k,t and the excluded ops with reasons."""

    model_config = ConfigDict(extra="forbid")

    accepted: list[DeltaOp] = []
    rejected: list[Rejection] = []


class AccessValidation(BaseModel):
    """What Validate_acc made of an access set: the ids asked for, R̂_k,t, the rejected ones, and
    the accepted ids not yet visible (what Disclose will reveal), in order."""

    model_config = ConfigDict(extra="forbid")

    requested: list[str] = []
    accepted: list[str] = []
    rejected: list[Rejection] = []
    to_disclose: list[str] = []


def validate_upd(delta: Sequence[Any], state: ActiveState) -> UpdateValidation:
    """Validate_upd(ΔS_k,t | P, S_k,t) (eq. 1): each op in order, against the state the earlier
    accepted ops left; malformed items are rejected, never raised."""
    result = UpdateValidation()
    for raw in delta:
        try:
            op = _DELTA_OP.validate_python(raw)
        except ValidationError as exc:
            result.rejected.append(_malformed(_op_name(raw), raw, "state_id", exc))
            continue
        rejection = check_delta_op(op, state)
        if rejection is not None:
            result.rejected.append(rejection)
            continue
        result.accepted.append(op)
        state = replace(state, current=commit(state.current, [op], state.request))
    return result


def commit(current: Mapping[str, StateNode], ops: Sequence[DeltaOp], request: int) -> dict[str, StateNode]:
    """Commit(S_k,t, ΔŜ_k,t) (eq. 1): the current request's states after the validated ops."""
    after = dict(current)
    for op in ops:
        if isinstance(op, AddOp):
            after[op.state_id] = StateNode(state_id=op.state_id, type=op.state_set, summary=op.summary, value=op.value,
                                           refs=op.refs, source_request=request)
        elif isinstance(op, UpdateOp):
            after[op.state_id] = after[op.state_id].model_copy(update=op.changes())
        elif isinstance(op, RemoveOp):
            del after[op.state_id]
    return after


def validate_acc(focus: Sequence[Any], state: ActiveState) -> AccessValidation:
    """Validate_acc(R_k,t | P, G_k, S_k,t) (eq. 2, appendix B.4 eq. 5): ids in IDs(G_k) ∪ ToolRefs(S_k,t)."""
    result = AccessValidation()
    for raw in focus:
        try:
            request = FocusRequest.model_validate({"target_id": raw} if isinstance(raw, str) else raw)
        except ValidationError as exc:
            result.rejected.append(_malformed("focus", raw, "target_id", exc))
            continue
        target = request.target_id
        result.requested.append(target)
        rejection = check_access(target, state)
        if rejection is not None:
            result.rejected.append(rejection)
            continue
        result.accepted.append(target)
        if not state.is_visible(target) and target not in result.to_disclose:
            result.to_disclose.append(target)
    return result


def disclose(state: ActiveState, accepted: Sequence[str]) -> dict[str, StateNode]:
    """Disclose(M_k, S_k,t, R̂_k,t) (eq. 2): the content and relations of the accepted ids not yet in
    S_k,t (a repository node, or a current-request observation as a knowledge node); never the
    content of related nodes."""
    disclosed: dict[str, StateNode] = {}
    for state_id in accepted:
        if state.is_visible(state_id) or state_id in disclosed:
            continue
        node = state.repository.get(state_id)
        if node is None:
            obs = state.observations[state_id]
            node = StateNode(state_id=obs.obs_id, type=StateType.KNOWLEDGE, summary=obs.summary, value=obs.content,
                             source_request=state.request, origin=Origin.TOOL)
        disclosed[state_id] = node
    return disclosed


def persist(repository: Repository, request: RequestRecord, retained: Sequence[StateNode],
            observations: Mapping[str, Observation]) -> Repository:
    """Persist(M_k, q_k, S_k,T+1, O_k) (eq. 4): the request, its retained states (relations to
    states that no longer exist dropped) and the raw observations they reference, as knowledge
    nodes. M is append-only, so this appends to ``repository`` (cost: what the request adds) and
    returns it as M_k+1."""
    kept_obs = {ref.state_id: observations[ref.state_id] for node in retained for ref in node.refs
                if ref.state_id in observations}
    exists = {n.state_id for n in retained} | set(kept_obs)

    def resolves(target: str) -> bool:
        return target in exists or target in repository

    nodes = [node if all(resolves(r.state_id) for r in node.refs)
             else node.model_copy(update={"refs": tuple(r for r in node.refs if resolves(r.state_id))})
             for node in retained]
    nodes += [StateNode(state_id=obs.obs_id, type=StateType.KNOWLEDGE, summary=obs.summary, value=obs.content,
                        source_request=request.query_id, origin=Origin.TOOL)
              for obs in sorted(kept_obs.values(), key=lambda o: _obs_order(o.obs_id))]
    repository.persist(request, nodes)
    return repository


def index(repository: Repository) -> tuple[IndexEntry, ...]:
    """G_k = Index(M_k) (eq. 4): prior requests with their indexed states' ids and summaries."""
    return repository.index()


def _obs_order(obs_id: str) -> tuple[int, int]:
    _, k, t = obs_id.split("_")
    return int(k), int(t)


def _op_name(raw: Any) -> str:
    operation = raw.get("operation") if isinstance(raw, dict) else None
    return operation if isinstance(operation, str) else "unknown"


def _malformed(operation: str, raw: Any, id_field: str, exc: ValidationError) -> Rejection:
    state_id = raw.get(id_field) if isinstance(raw, dict) else None
    problems = "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'item'}: {err['msg']}" for err in exc.errors()
    )
    return Rejection(
        operation=operation,
        state_id=state_id if isinstance(state_id, str) else "",
        reason=Reason.MALFORMED,
        detail=f"malformed {operation}: {problems}",
    )
