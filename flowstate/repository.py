"""The Persistent State Repository M_k and its Historical State Index G_k (paper §2.1, eq. 4)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict

from flowstate.state import Origin, StateNode


class RequestRecord(BaseModel):
    """A prior user request q_k: its id (k, counted from 1) and text."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    query_id: int
    query: str


class IndexState(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    state_id: str
    summary: str


class IndexEntry(BaseModel):
    """One prior request in G_k with the indexed states it produced (FlowState: the model-made ones)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    user_query: str
    query_id: int
    states: tuple[IndexState, ...]


class RepositoryExport(BaseModel):
    """The lossless JSON form of a repository."""

    model_config = ConfigDict(extra="forbid")

    requests: list[RequestRecord]
    nodes: list[StateNode]


class Repository:
    """Append-only store of requests and nodes; historical nodes are immutable and never deleted.

    Nodes are kept in insertion order in a dict, so lookups are O(1) and persisting a request
    costs time proportional to what that request adds, not to the repository's size. Which nodes the
    index lists is the method's choice (``index_origins``; FlowState: the model-made ones).
    """

    def __init__(self, index_origins: frozenset[Origin] = frozenset({Origin.MODEL})) -> None:
        self.index_origins = index_origins
        self._requests: list[RequestRecord] = []
        self._nodes: dict[str, StateNode] = {}
        # Index entries per request, built as requests are persisted (G_k is never recomputed).
        self._index: list[IndexEntry] = []
        self._index_ids: set[str] = set()

    # -- reading -------------------------------------------------------------------------
    @property
    def requests(self) -> tuple[RequestRecord, ...]:
        return tuple(self._requests)

    def __contains__(self, state_id: object) -> bool:
        return state_id in self._nodes

    def __len__(self) -> int:
        return len(self._nodes)

    def get(self, state_id: str) -> StateNode | None:
        return self._nodes.get(state_id)

    def nodes(self) -> Iterator[StateNode]:
        return iter(self._nodes.values())

    def is_indexed(self, state_id: str) -> bool:
        """Whether ``state_id`` is in IDs(G): an indexed historical state."""
        return state_id in self._index_ids

    def index(self) -> tuple[IndexEntry, ...]:
        """G_k = Index(M_k): prior requests with their indexed states' ids and summaries.

        Persisted observations are never listed: they are reached through the refs of disclosed
        states (ToolRefs).
        """
        return tuple(self._index)

    # -- writing -------------------------------------------------------------------------
    def persist(self, request: RequestRecord, nodes: Iterable[StateNode]) -> None:
        """Append one finished request and the nodes it retained (Persist of eq. 4)."""
        if request.query_id != len(self._requests) + 1:
            raise ValueError(
                f"requests are persisted in order: expected query_id {len(self._requests) + 1}, "
                f"got {request.query_id}"
            )
        new_nodes = list(nodes)
        for node in new_nodes:
            if node.state_id in self._nodes:
                raise ValueError(f"state {node.state_id!r} already exists; historical nodes are immutable")
            if node.source_request != request.query_id:
                raise ValueError(
                    f"state {node.state_id!r} has source_request {node.source_request}, "
                    f"but is persisted with request {request.query_id}"
                )
        self._requests.append(request)
        for node in new_nodes:
            self._nodes[node.state_id] = node
        indexed = tuple(
            IndexState(state_id=n.state_id, summary=n.summary) for n in new_nodes
            if n.origin in self.index_origins and n.origin is not Origin.TOOL
        )
        self._index.append(IndexEntry(user_query=request.query, query_id=request.query_id, states=indexed))
        self._index_ids.update(s.state_id for s in indexed)

    # -- JSON round trip -----------------------------------------------------------------
    def export(self) -> RepositoryExport:
        return RepositoryExport(requests=list(self._requests), nodes=list(self._nodes.values()))

    @classmethod
    def from_export(cls, data: RepositoryExport | dict[str, Any],
                    index_origins: frozenset[Origin] = frozenset({Origin.MODEL})) -> Repository:
        export = data if isinstance(data, RepositoryExport) else RepositoryExport.model_validate(data)
        repo = cls(index_origins)
        by_request: dict[int, list[StateNode]] = {}
        for node in export.nodes:
            by_request.setdefault(node.source_request, []).append(node)
        for request in export.requests:
            repo.persist(request, by_request.pop(request.query_id, []))
        if by_request:
            orphans = sorted(by_request)
            raise ValueError(f"nodes reference requests that are not in the export: {orphans}")
        return repo
