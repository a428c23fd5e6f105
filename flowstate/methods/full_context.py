"""Full Context: every earlier request and step, in order, in the prompt (appendix B.3).

The paper gives only the template; here ``{full_trajectory}`` lists each user request, each model
output's tool calls and message, and each observation with its id. The latest observation appears
only in ``<latest_observation>`` and joins the history one step later, so the serialized history is
append-only (prefix-cache friendly).

With ``history_tokens`` set (MemoryArena's Full Context keeps the last 120,000 tokens), the oldest
history entries are dropped first until the history fits both that cap and what the agent's context
window leaves after the rest of the prompt and the completion budget; each step that drops entries
writes a ``history_dropped`` record. Tokens are the loop's labelled estimate (about four characters
per token); unset, nothing is dropped and the prompt bytes are τ-bench's.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from flowstate.chat import ChatMessage, estimate_tokens
from flowstate.methods.base import MethodCallers, MethodOptions, OptionsT, StateStats
from flowstate.methods.trajectory import TrajectorySession
from flowstate.prompts import TaskPrompt
from flowstate.runtime import Observation


class FullContextOptions(MethodOptions):
    name: Literal["full_context"] = "full_context"
    # Keep at most this many tokens of history, newest first (None: keep everything). Dumped only
    # when set, so the ids of jobs without it stay what they were.
    history_tokens: int | None = Field(default=None, gt=0, exclude_if=lambda v: v is None)


class FullContextSession(TrajectorySession[OptionsT]):
    input_template = "full_context_input"
    record_kinds = ("history_dropped",)

    def __init__(self, task: TaskPrompt, options: OptionsT, tool_names: list[str] | None = None,
                 callers: MethodCallers = MethodCallers()) -> None:
        super().__init__(task, options, tool_names, callers)
        self._dropped_tokens = 0

    @property
    def history_tokens(self) -> int | None:
        """The cap (a method built on this session may have options without one)."""
        return getattr(self.options, "history_tokens", None)

    async def messages(self, observation: Observation | None) -> list[ChatMessage]:
        if self.history_tokens is not None:
            self._drop_oldest(observation)
        return await super().messages(observation)

    def input_slots(self) -> dict[str, str]:
        history = self.trajectory.text()
        self.last_stats = StateStats(active_state_text=history)
        return {"full_trajectory": history}

    def _history_budget(self, observation: Observation | None) -> int:
        """The cap, or less where the agent's window leaves less beside the rest of this prompt."""
        budget = self.history_tokens or 0
        window = self.callers.agent_prompt_tokens
        if window is None:
            return budget
        rest = sum(estimate_tokens(m.content) for m in self.compose({"full_trajectory": ""}, observation))
        return max(0, min(budget, window - rest))

    def _drop_oldest(self, observation: Observation | None) -> None:
        budget = self._history_budget(observation)
        entries, tokens = self.trajectory.drop_oldest(budget)
        if entries:
            self._dropped_tokens += tokens
            self.record("history_dropped", {"entries": entries, "history_tokens": sum(self.trajectory.tokens),
                                            "budget_tokens": budget, "dropped_tokens_total": self._dropped_tokens})
