"""Finished episodes counted by outcome: the driver's status line and the live MLflow runs keep
the same counts, each over its own episodes (the sweep's, one cell's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.run.actors import EpisodeSummary


@dataclass(kw_only=True)
class EpisodeTally:
    """Outcomes, and the mean reward as a sum and a count (not a list: the driver's memory stays
    flat however many episodes finish)."""

    completed: int = 0
    failed: int = 0  # infrastructure failures, after every attempt
    grading_failed: int = 0
    rewarded: int = 0
    reward_sum: float = 0.0

    @property
    def finished(self) -> int:
        return self.completed + self.failed + self.grading_failed

    def add(self, summary: EpisodeSummary | None) -> None:
        """One finished episode: its summary, or None for one recorded as an infrastructure failure."""
        if summary is None:
            self.failed += 1
            return
        if summary.status == "completed":
            self.completed += 1
        else:
            self.grading_failed += 1
        if summary.reward is not None:
            self.rewarded += 1
            self.reward_sum += summary.reward
