"""The B.3 "Memory System" session every retrieval method shares (BM25, ReasoningBank, Mem0): what
the memory returned for the request's memory query in ``<memory>``, the current request's
trajectory (rendered as Full Context renders it) in ``<trajectory_history>``.

The benchmark's entries are stored when a request ends (its initial memory before the first
request); retrieval runs once per request, after storing and before the first step.
"""

from __future__ import annotations

from abc import abstractmethod

from flowstate.methods.base import Capability, OptionsT, StateStats
from flowstate.methods.trajectory import TrajectorySession
from flowstate.records import RequestOutcome, RequestStart

# What ``<memory>`` shows when nothing was retrieved (MemoryArena's wrapper writes ``None``).
NOTHING_RETRIEVED = "None"


class MemorySystemSession(TrajectorySession[OptionsT]):
    uses = frozenset({Capability.MEMORY})
    input_template = "memory_input"
    whole_episode = False
    retrieved: str = NOTHING_RETRIEVED

    @abstractmethod
    async def store(self, entries: list[str]) -> None:
        """Write the benchmark's memory entries (record what was written)."""

    @abstractmethod
    async def retrieve(self, query: str) -> str:
        """What ``<memory>`` shows for ``query`` (record what was retrieved)."""

    async def begin_request(self, request: RequestStart) -> None:
        await super().begin_request(request)
        await self.store(request.memory_entries)
        self.retrieved = await self.retrieve(request.memory_query)

    def input_slots(self) -> dict[str, str]:
        history = self.trajectory.text()
        self.last_stats = StateStats(active_state_text=self.retrieved + "\n" + history)
        return {"retrieved_memory": self.retrieved, "query_trajectory": history}

    async def end_request(self, outcome: RequestOutcome) -> None:
        await super().end_request(outcome)
        await self.store(outcome.memory_entries)
