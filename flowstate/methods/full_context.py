"""Full Context: every earlier request and step, in order, in the prompt (appendix B.3).

The paper gives only the template; here ``{full_trajectory}`` lists each user request, each model
output's tool calls and message, and each observation with its id. The latest observation appears
only in ``<latest_observation>`` and joins the history one step later, so the serialized history is
append-only (prefix-cache friendly).
"""

from __future__ import annotations

from typing import Literal

from flowstate.methods.base import MethodCallers, MethodOptions, MethodSession, StateStats
from flowstate.methods.render import output_line, render_observation, request_line
from flowstate.prompts import TaskPrompt, system_prompt
from flowstate.protocol import ParsedOutput
from flowstate.records import RequestOutcome, RequestStart
from flowstate.runtime import Observation, StepEffects
from flowstate.state import observation_id


class FullContextOptions(MethodOptions):
    name: Literal["full_context"] = "full_context"


class FullContextSession(MethodSession):
    input_template = "full_context_input"

    def __init__(self, task: TaskPrompt, options: MethodOptions, tool_names: list[str] | None = None,
                 callers: MethodCallers = MethodCallers()) -> None:
        super().__init__(task, options, tool_names, callers)
        self._entries: list[str] = []
        self._latest: Observation | None = None
        self._request = 0
        self._step = 0

    def system_prompt(self, task: TaskPrompt) -> str:
        return system_prompt(method_rules="", output_protocol=self.output_protocol("react"), task=task)

    async def begin_request(self, request: RequestStart) -> None:
        await super().begin_request(request)
        self._request = request.index
        self._step = 0
        self._entries.append(request_line(self._request, request.query))

    def input_slots(self) -> dict[str, str]:
        history = "\n".join(self._entries)
        self.last_stats = StateStats(active_state_text=history)
        return {"full_trajectory": history}

    def apply_output(self, parsed: ParsedOutput) -> StepEffects:
        self._step += 1
        self._flush_latest()
        self._entries.append(output_line(self._request, self._step, parsed.tool_calls, parsed.assistant_message))
        return StepEffects()

    async def add_observation(self, step: int, content: str, summary: str) -> Observation:
        obs = Observation(obs_id=observation_id(self._request, step), content=content, summary=summary)
        self._latest = obs
        return obs

    async def end_request(self, outcome: RequestOutcome) -> None:
        self._flush_latest()  # a request cut short right after a tool call

    def _flush_latest(self) -> None:
        if self._latest is not None:
            self._entries.append(render_observation(self._latest))
            self._latest = None
