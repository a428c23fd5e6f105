"""The history Full Context shows, kept as entries: each request, each model output's tool calls and
message, and each observation with its id. The latest observation joins the history one step late
(it is shown as ``<latest_observation>`` first), so the rendered text only grows."""

from __future__ import annotations

from flowstate.chat import estimate_tokens
from flowstate.methods.render import output_line, render_observation, request_line
from flowstate.protocol import ParsedOutput
from flowstate.runtime import Observation


class Trajectory:
    def __init__(self) -> None:
        self.entries: list[str] = []
        self.tokens: list[int] = []  # the labelled estimate of each entry
        self._latest: Observation | None = None

    def add_request(self, request: int, query: str) -> None:
        self._append(request_line(request, query))

    def add_output(self, request: int, step: int, parsed: ParsedOutput) -> None:
        self.flush()
        self._append(output_line(request, step, parsed.tool_calls, parsed.assistant_message))

    def observe(self, observation: Observation) -> None:
        self._latest = observation

    def flush(self) -> None:
        """Move the latest observation into the history (a request cut short right after a tool call)."""
        if self._latest is not None:
            self._append(render_observation(self._latest))
            self._latest = None

    def text(self) -> str:
        return "\n".join(self.entries)

    def drop_oldest(self, budget: int) -> tuple[int, int]:
        """Drop the oldest entries until the rest fit ``budget`` tokens: (entries, tokens) dropped."""
        kept, entries, tokens = sum(self.tokens), 0, 0
        while self.entries and kept > budget:
            self.entries.pop(0)
            dropped = self.tokens.pop(0)
            kept -= dropped
            entries += 1
            tokens += dropped
        return entries, tokens

    def _append(self, entry: str) -> None:
        self.entries.append(entry)
        self.tokens.append(estimate_tokens(entry))
