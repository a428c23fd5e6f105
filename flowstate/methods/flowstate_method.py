"""FlowState: Historical State Index + Active State, edited by ISU and disclosed by PSA (paper §2)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from flowstate.methods.base import Capability, MethodCallers, MethodOptions, MethodSession, OptionsT, StateStats
from flowstate.methods.layout import PAPER_INPUT, ChangeOrder, PromptLayout, input_template, layout_of
from flowstate.methods.render import active_node_json, index_entry_json, json_lines
from flowstate.prompts import TaskPrompt, system_prompt, template
from flowstate.protocol import ParsedOutput
from flowstate.records import RequestOutcome, RequestStart
from flowstate.repository import Repository, RepositoryExport
from flowstate.runtime import FlowStateRuntime, Observation, StepEffects
from flowstate.state import Origin


class FlowStateOptions(MethodOptions):
    name: Literal["flowstate"] = "flowstate"
    # Beyond the paper (off for the paper-faithful method): the same input blocks in an order that
    # keeps more of each prompt a prefix of the next (flowstate.methods.layout). Dumped only when
    # set, so the ids of jobs without it stay what they were.
    prompt_layout: PromptLayout = Field(default=PromptLayout.PAPER, exclude_if=lambda v: v is PromptLayout.PAPER)

    @property
    def display(self) -> str:
        if self.label or self.prompt_layout is PromptLayout.PAPER:
            return super().display
        return f"{super().display}-{self.prompt_layout.value}"


class FlowStateSession(MethodSession[OptionsT]):
    """The paper's method: the index and the Active State in ``<agent_status>``, four output blocks."""

    uses = frozenset({Capability.STATE_DELTA, Capability.STATE_FOCUS})
    input_template = PAPER_INPUT
    # The nodes G_k lists (model-made); persisted observations are reached through refs.
    index_origins = frozenset({Origin.MODEL})

    def __init__(self, task: TaskPrompt, options: OptionsT, tool_names: list[str] | None = None,
                 callers: MethodCallers = MethodCallers(), repository: Repository | None = None) -> None:
        super().__init__(task, options, tool_names, callers)
        self.runtime = FlowStateRuntime(repository, self.index_origins)
        self._index_text = "[]"
        self._index_states = 0
        # The ablations' options have no layout: they keep the paper's.
        self.layout = layout_of(options) or PromptLayout.PAPER
        self._order = ChangeOrder() if self.layout is PromptLayout.CACHE_FRIENDLY else None

    def system_prompt(self, task: TaskPrompt) -> str:
        return self._system_prompt(template("flowstate_rules"), task)

    def _system_prompt(self, rules: str, task: TaskPrompt) -> str:
        return system_prompt(method_rules="\n" + rules + "\n", output_protocol=self.output_protocol("flowstate"), task=task)

    async def begin_request(self, request: RequestStart) -> None:
        await super().begin_request(request)
        self.runtime.begin_request(request.query)
        index = self.runtime.index()  # G_k is fixed for the whole request: render it once
        self._index_text = json_lines([index_entry_json(e) for e in index])
        self._index_states = sum(len(e.states) for e in index)

    def input_template_text(self) -> str:
        return input_template(self.layout)

    def input_slots(self) -> dict[str, str]:
        items = [active_node_json(n) for n in self.runtime.active_nodes()]
        active = json_lines(self._order.arrange(items) if self._order is not None else items)
        self.last_stats = StateStats(
            active_nodes=self.runtime.active_size(), active_state_text=active, index_states=self._index_states)
        return {"historical_state_index": self._index_text, "active_state": active}

    def apply_output(self, parsed: ParsedOutput) -> StepEffects:
        return self.runtime.apply(parsed.state_delta, parsed.state_focus)

    async def add_observation(self, step: int, content: str, summary: str) -> Observation:
        return self.runtime.add_observation(step, content, summary)

    async def end_request(self, outcome: RequestOutcome) -> None:
        self.runtime.end_request()

    def final_state(self) -> RepositoryExport:
        return self.runtime.repository.export()
