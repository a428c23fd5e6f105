"""The FlowState runtime for one episode: Active State, ISU commit, PSA disclosure, Persist.

This is Algorithm 1 without the model and the environment: it receives already-parsed model
proposals and observations, and maintains M_k, G_k and S_k,t.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence, Set
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
    observation_id,
)

_DELTA_OP = TypeAdapter(DeltaOp)


class Observation(BaseModel):
    """A raw tool observation of the current request, referencable as evidence by its id."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    obs_id: str
    content: str
    summary: str


class StepEffects(BaseModel):
    """What ISU and PSA did with one model output."""

    model_config = ConfigDict(extra="forbid")

    accepted_ops: list[DeltaOp] = []
    rejected_ops: list[Rejection] = []
    focus_requested: list[str] = []
    focus_accepted: list[str] = []
    focus_rejected: list[Rejection] = []
    disclosed: list[str] = []
    # The request that created each disclosed state (how far back PSA reached).
    disclosed_from: list[int] = []


class FlowStateRuntime:
    """M_k, G_k and S_k,t of one episode, edited only through validated ops."""

    def __init__(self, repository: Repository | None = None,
                 index_origins: frozenset[Origin] = frozenset({Origin.MODEL})) -> None:
        self.repository = repository if repository is not None else Repository(index_origins)
        self._request: RequestRecord | None = None
        self._current: dict[str, StateNode] = {}
        self._disclosed: dict[str, StateNode] = {}
        self._observations: dict[str, Observation] = {}

    # -- request lifecycle ---------------------------------------------------------------
    @property
    def request_index(self) -> int:
        """k of the current request (the next one, between requests)."""
        return self._request.query_id if self._request else len(self.repository.requests) + 1

    @property
    def in_request(self) -> bool:
        return self._request is not None

    def begin_request(self, query: str) -> None:
        if self._request is not None:
            raise RuntimeError("begin_request called twice without end_request")
        self._request = RequestRecord(query_id=len(self.repository.requests) + 1, query=query)
        self._current.clear()
        self._disclosed.clear()
        self._observations.clear()

    def add_observation(self, step: int, content: str, summary: str = "") -> Observation:
        """Register what step ``step`` of the current request returned, under ``obs_{k}_{t}``."""
        request = self._require_request()
        obs_id = observation_id(request.query_id, step)
        if obs_id in self._observations:
            raise ValueError(f"observation {obs_id} already recorded")
        obs = Observation(obs_id=obs_id, content=content, summary=summary or f"Raw tool result {obs_id}")
        self._observations[obs_id] = obs
        return obs

    def end_request(self, rule_nodes: Sequence[StateNode] = ()) -> None:
        """Persist (eq. 4): retained states, the observations they reference, then re-index.

        ``rule_nodes`` are nodes a method's rule makes at the end of the request (origin ``rule``,
        this request as their source); they are persisted like retained states.
        """
        request = self._require_request()
        for node in rule_nodes:
            if node.origin is not Origin.RULE or node.source_request != request.query_id:
                raise ValueError(f"rule node {node.state_id!r} needs origin 'rule' and source_request {request.query_id}")
            if node.state_id in self._current or node.state_id in self.repository:
                raise ValueError(f"rule node {node.state_id!r} reuses an existing state id")
        retained = [*self._current.values(), *rule_nodes]
        kept_obs: dict[str, Observation] = {}
        for node in retained:
            for ref in node.refs:
                if ref.state_id in self._observations:
                    kept_obs[ref.state_id] = self._observations[ref.state_id]
        exists = {n.state_id for n in retained} | set(kept_obs)

        def resolves(target: str) -> bool:
            return target in exists or target in self.repository

        nodes = [
            node.model_copy(update={"refs": tuple(r for r in node.refs if resolves(r.state_id))})
            if not all(resolves(r.state_id) for r in node.refs)
            else node
            for node in retained
        ]
        nodes += [
            StateNode(
                state_id=obs.obs_id,
                type=StateType.KNOWLEDGE,
                summary=obs.summary,
                value=obs.content,
                source_request=request.query_id,
                origin=Origin.TOOL,
            )
            for obs in sorted(kept_obs.values(), key=lambda o: _obs_order(o.obs_id))
        ]
        self.repository.persist(request, nodes)
        self._request = None
        self._current.clear()
        self._disclosed.clear()
        self._observations.clear()

    # -- ISU + PSA for one model output --------------------------------------------------
    def apply(self, delta: Sequence[Any], focus: Sequence[Any]) -> StepEffects:
        """Validate and apply one step's proposals (Algorithm 1, lines 10-13).

        Accesses are validated against S_k,t before the delta is committed; the ops of the
        delta are validated and committed in order. Malformed items are rejected, never raised.
        """
        self._require_request()
        effects = StepEffects()
        to_disclose: list[str] = []
        for raw in focus:
            try:
                request = FocusRequest.model_validate({"target_id": raw} if isinstance(raw, str) else raw)
            except ValidationError as exc:
                effects.focus_rejected.append(_malformed("focus", raw, "target_id", exc))
                continue
            effects.focus_requested.append(request.target_id)
            rejection = check_access(request.target_id, self)
            if rejection is not None:
                effects.focus_rejected.append(rejection)
                continue
            effects.focus_accepted.append(request.target_id)
            if not self.is_visible(request.target_id) and request.target_id not in to_disclose:
                to_disclose.append(request.target_id)
        for raw in delta:
            try:
                op = _DELTA_OP.validate_python(raw)
            except ValidationError as exc:
                effects.rejected_ops.append(_malformed(_op_name(raw), raw, "state_id", exc))
                continue
            rejection = check_delta_op(op, self)
            if rejection is not None:
                effects.rejected_ops.append(rejection)
                continue
            self._commit(op)
            effects.accepted_ops.append(op)
        for state_id in to_disclose:
            node = self._historical(state_id)
            self._disclosed[state_id] = node
            effects.disclosed.append(state_id)
            effects.disclosed_from.append(node.source_request)
        return effects

    def _commit(self, op: DeltaOp) -> None:
        request = self._require_request()
        if isinstance(op, AddOp):
            self._current[op.state_id] = StateNode(
                state_id=op.state_id,
                type=op.state_set,
                summary=op.summary,
                value=op.value,
                refs=op.refs,
                source_request=request.query_id,
            )
        elif isinstance(op, UpdateOp):
            self._current[op.state_id] = self._current[op.state_id].model_copy(update=op.changes())
        elif isinstance(op, RemoveOp):
            del self._current[op.state_id]

    def _historical(self, state_id: str) -> StateNode:
        """Content to disclose: a repository node, or a current-request observation as knowledge."""
        node = self.repository.get(state_id)
        if node is not None:
            return node
        obs = self._observations[state_id]
        return StateNode(
            state_id=obs.obs_id,
            type=StateType.KNOWLEDGE,
            summary=obs.summary,
            value=obs.content,
            source_request=self.request_index,
            origin=Origin.TOOL,
        )

    # -- RuleView --------------------------------------------------------------------------
    def is_visible(self, state_id: str) -> bool:
        return state_id in self._current or state_id in self._disclosed

    def is_current(self, state_id: str) -> bool:
        return state_id in self._current

    def in_index(self, state_id: str) -> bool:
        return self.repository.is_indexed(state_id)

    def in_repository(self, state_id: str) -> bool:
        return state_id in self.repository

    def is_current_observation(self, state_id: str) -> bool:
        return state_id in self._observations

    def tool_refs(self) -> Set[str]:
        return {
            ref.state_id
            for node in self.active_nodes()
            for ref in node.refs
            if is_observation_id(ref.state_id)
            and (ref.state_id in self.repository or ref.state_id in self._observations)
        }

    # -- views for serialization -----------------------------------------------------------
    def active_nodes(self) -> Iterable[StateNode]:
        """S_k,t in a stable order: disclosed historical states first, then current ones."""
        yield from self._disclosed.values()
        yield from self._current.values()

    def active_size(self) -> int:
        return len(self._current) + len(self._disclosed)

    def index(self) -> tuple[IndexEntry, ...]:
        return self.repository.index()

    def _require_request(self) -> RequestRecord:
        if self._request is None:
            raise RuntimeError("no request in progress: call begin_request first")
        return self._request


def _obs_order(obs_id: str) -> tuple[int, int]:
    _, k, t = obs_id.split("_")
    return int(k), int(t)


def _op_name(raw: Any) -> str:
    if isinstance(raw, dict) and isinstance(raw.get("operation"), str):
        return raw["operation"]
    return "unknown"


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
