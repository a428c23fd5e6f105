"""The FlowState runtime for one episode: the state between steps, edited through the paper's operations.

This is Algorithm 1 without the model and the environment: it receives already-parsed model
proposals and observations, keeps M_k, G_k and S_k,t, and applies ISU, PSA, Persist and Index
(:mod:`flowstate.operations`) to them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence, Set
from typing import Any

from pydantic import BaseModel, ConfigDict

from flowstate.operations import (
    ActiveState,
    Observation,
    commit,
    disclose,
    index,
    persist,
    validate_acc,
    validate_upd,
)
from flowstate.repository import IndexEntry, Repository, RequestRecord
from flowstate.rules import Rejection
from flowstate.state import DeltaOp, Origin, StateNode, observation_id

__all__ = ["FlowStateRuntime", "Observation", "StepEffects"]


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
        self._reset()

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
        """Persist (eq. 4) the current request's retained states and the observations they reference.

        ``rule_nodes`` are nodes a method's rule makes at the end of the request (origin ``rule``,
        this request as their source); they are persisted like retained states.
        """
        request = self._require_request()
        for node in rule_nodes:
            if node.origin is not Origin.RULE or node.source_request != request.query_id:
                raise ValueError(f"rule node {node.state_id!r} needs origin 'rule' and source_request {request.query_id}")
            if node.state_id in self._current or node.state_id in self.repository:
                raise ValueError(f"rule node {node.state_id!r} reuses an existing state id")
        persist(self.repository, request, [*self._current.values(), *rule_nodes], self._observations)
        self._request = None
        self._reset()

    # -- one step: ISU and PSA -------------------------------------------------------------
    def apply(self, delta: Sequence[Any], focus: Sequence[Any]) -> StepEffects:
        """Validate and apply one step's proposals (Algorithm 1, lines 10-13).

        Both halves are validated against S_k,t as the step found it; then ISU commits the delta
        (S⁺_k,t) and PSA discloses what was accessed (S_k,t+1). Malformed items are rejected, never raised.
        """
        request = self._require_request()
        state = self.state()
        access = validate_acc(focus, state)  # PSA: Validate_acc
        update = validate_upd(delta, state)  # ISU: Validate_upd
        self._current = commit(self._current, update.accepted, request.query_id)  # ISU: Commit
        revealed = disclose(state, access.to_disclose)  # PSA: Disclose
        self._disclosed.update(revealed)
        return StepEffects(
            accepted_ops=update.accepted, rejected_ops=update.rejected, focus_requested=access.requested,
            focus_accepted=access.accepted, focus_rejected=access.rejected, disclosed=list(revealed),
            disclosed_from=[node.source_request for node in revealed.values()],
        )

    def disclose_indexed(self) -> list[str]:
        """Disclose every state the index lists, content and relations (FlowState w/o PSA: the
        history is in the Active State from the start of the request)."""
        ids = [node.state_id for node in self.repository.nodes() if self.repository.is_indexed(node.state_id)]
        revealed = disclose(self.state(), ids)
        self._disclosed.update(revealed)
        return list(revealed)

    def observation_ids(self) -> list[str]:
        """The current request's observations, in step order."""
        return list(self._observations)

    def state(self) -> ActiveState:
        """S_k,t as it stands (with M_k and the request's observations, which the rules consult)."""
        return ActiveState(request=self.request_index, repository=self.repository, current=self._current,
                           disclosed=self._disclosed, observations=self._observations)

    # -- RuleView (for callers that check a rule against the live state) -------------------
    def is_visible(self, state_id: str) -> bool:
        return self.state().is_visible(state_id)

    def is_current(self, state_id: str) -> bool:
        return state_id in self._current

    def in_index(self, state_id: str) -> bool:
        return self.repository.is_indexed(state_id)

    def in_repository(self, state_id: str) -> bool:
        return state_id in self.repository

    def is_current_observation(self, state_id: str) -> bool:
        return state_id in self._observations

    def tool_refs(self) -> Set[str]:
        return self.state().tool_refs()

    # -- views for serialization -----------------------------------------------------------
    def active_nodes(self) -> Iterable[StateNode]:
        """S_k,t in a stable order: disclosed historical states first, then current ones."""
        return self.state().nodes()

    def active_size(self) -> int:
        return len(self._current) + len(self._disclosed)

    def index(self) -> tuple[IndexEntry, ...]:
        return index(self.repository)

    def _reset(self) -> None:
        self._current = {}
        self._disclosed = {}
        self._observations = {}

    def _require_request(self) -> RequestRecord:
        if self._request is None:
            raise RuntimeError("no request in progress: call begin_request first")
        return self._request
