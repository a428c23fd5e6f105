"""The history Full Context shows, kept as entries: each request, each model output's tool calls and
message, and each observation with its id. The latest observation joins the history one step late
(it is shown as ``<latest_observation>`` first), so the rendered text only grows."""

from __future__ import annotations

from typing import ClassVar

from flowstate.chat import estimate_tokens
from flowstate.methods.base import MethodCallers, MethodSession, OptionsT
from flowstate.methods.render import output_line, render_observation, request_line
from flowstate.prompts import TaskPrompt, system_prompt
from flowstate.protocol import ParsedOutput
from flowstate.records import RequestOutcome, RequestStart
from flowstate.runtime import Observation, StepEffects
from flowstate.state import observation_id


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


class TrajectorySession(MethodSession[OptionsT]):
    """A ReAct session (tool calls and a message, no state blocks) whose input shows a trajectory:
    the whole episode's (Full Context) or only the current request's (memory methods)."""

    whole_episode: ClassVar[bool] = True

    def __init__(self, task: TaskPrompt, options: OptionsT, tool_names: list[str] | None = None,
                 callers: MethodCallers = MethodCallers()) -> None:
        super().__init__(task, options, tool_names, callers)
        self.trajectory = Trajectory()
        self._request = 0
        self._step = 0

    def system_prompt(self, task: TaskPrompt) -> str:
        return system_prompt(method_rules="", output_protocol=self.output_protocol("react"), task=task)

    async def begin_request(self, request: RequestStart) -> None:
        await super().begin_request(request)
        self._request, self._step = request.index, 0
        if not self.whole_episode:
            self.trajectory = Trajectory()
        self.trajectory.add_request(request.index, request.query)

    def apply_output(self, parsed: ParsedOutput) -> StepEffects:
        self._step += 1
        self.trajectory.add_output(self._request, self._step, parsed)
        return StepEffects()

    async def add_observation(self, step: int, content: str, summary: str) -> Observation:
        obs = Observation(obs_id=observation_id(self._request, step), content=content, summary=summary)
        self.trajectory.observe(obs)
        return obs

    async def end_request(self, outcome: RequestOutcome) -> None:
        self.trajectory.flush()  # a request cut short right after a tool call
