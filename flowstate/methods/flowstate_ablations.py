"""The paper's ablations (Table 3): FlowState without PSA and FlowState without ISU.

Each is FlowState with one half taken out of the method, the rules text and the output protocol.
The prompts are FlowState's templates with the edits below applied, so they follow the templates
and an edit that no longer applies is an error (:func:`flowstate.prompts.edited`).

- **w/o PSA**: ISU as in FlowState; no Historical State Index and no ``state_focus``. Every
  model-made historical state is in the Active State, with its content and relations, from the start
  of each request, and cannot be edited (B.4 still holds); persisted observations are not shown.
- **w/o ISU**: no ``state_delta``; within a request the agent sees that request's trajectory as Full
  Context renders it; PSA and the index as in FlowState. Each request ends with one rule-made node,
  ``request_<k>_response`` (a judgement: the final response, ``derives`` refs to the request's
  observations), so later requests can disclose it and then its observations.
"""

from __future__ import annotations

from typing import Literal

from flowstate.methods.base import Capability, MethodCallers, MethodOptions
from flowstate.methods.flowstate_method import FlowStateSession
from flowstate.methods.trajectory import Trajectory
from flowstate.prompts import TaskPrompt, edited, section, template
from flowstate.protocol import ParsedOutput
from flowstate.records import RequestOutcome, RequestStart
from flowstate.repository import Repository
from flowstate.runtime import Observation, StepEffects
from flowstate.state import Origin, Ref, RelationType, StateNode, StateType

RESPONSE_SUMMARY_CHARS = 200
NO_RESPONSE = "no final response"

# The output protocol's sentences that speak of the removed half (both protocol modes share them).
_JOINT = "jointly propose state updates, historical access, and an execution decision"
_WAIT = "Wait for the requested information before making updates or taking actions that require it."
_ACCESS_LINE = "Request missing historical information and perform any independent operations in the same step. " + _WAIT


def _without_block(protocol: str, block: str) -> str:
    """The output protocol without one block: its three tagged lines, or its JSON field's line."""
    lines = protocol.split("\n")
    if f"<{block}>" in lines:
        start = lines.index(f"<{block}>")
        return "\n".join(lines[:start] + lines[start + 3:])
    [index] = [i for i, line in enumerate(lines) if line.lstrip("{ ").startswith(f'"{block}": ')]
    if lines[index].startswith("{"):  # the object's first field: the next one opens the object
        lines[index + 1] = "{" + lines[index + 1].lstrip()
    return "\n".join(lines[:index] + lines[index + 1:])


def _three_blocks(protocol: str) -> str:
    return edited(protocol, replace=((" four ", " three "),))


class FlowStateNoPsaOptions(MethodOptions):
    name: Literal["flowstate_no_psa"] = "flowstate_no_psa"


class FlowStateNoPsaSession(FlowStateSession[FlowStateNoPsaOptions]):
    """ISU only: the history in the Active State from the start of every request."""

    uses = frozenset({Capability.STATE_DELTA})

    def system_prompt(self, task: TaskPrompt) -> str:
        rules = template("flowstate_rules")
        rules = edited(rules, remove=(section(rules, "### Progressive State Access"),), replace=((
            "Do not update or remove entries whose ids appear in the Historical State Index, even if their full "
            "contents have been expanded into Active State.",
            "Do not update or remove entries created in earlier requests, which Active State shows with their full "
            "contents."),))
        return self._system_prompt(rules, task)

    def output_protocol(self, stem: str) -> str:
        protocol = _without_block(super().output_protocol(stem), "state_focus")
        protocol = edited(protocol, remove=(_ACCESS_LINE + "\n",),
                          replace=((_JOINT, "jointly propose state updates and an execution decision"),))
        return _three_blocks(protocol)

    def input_template_text(self) -> str:
        return edited(super().input_template_text(), remove=("Historical State Index:\n{historical_state_index}\n",))

    async def begin_request(self, request: RequestStart) -> None:
        await super().begin_request(request)
        self.runtime.disclose_indexed()


class FlowStateNoIsuOptions(MethodOptions):
    name: Literal["flowstate_no_isu"] = "flowstate_no_isu"


class FlowStateNoIsuSession(FlowStateSession[FlowStateNoIsuOptions]):
    """PSA only: the request's trajectory in the prompt, a rule-made response node per request."""

    uses = frozenset({Capability.STATE_FOCUS})
    index_origins = frozenset({Origin.MODEL, Origin.RULE})

    def __init__(self, task: TaskPrompt, options: FlowStateNoIsuOptions, tool_names: list[str] | None = None,
                 callers: MethodCallers = MethodCallers(), repository: Repository | None = None) -> None:
        super().__init__(task, options, tool_names, callers, repository)
        self.trajectory = Trajectory()
        self._request = 0
        self._step = 0

    def system_prompt(self, task: TaskPrompt) -> str:
        rules = template("flowstate_rules")
        return self._system_prompt(edited(rules, remove=(section(rules, "### Incremental State Update"),)), task)

    def output_protocol(self, stem: str) -> str:
        protocol = _without_block(super().output_protocol(stem), "state_delta")
        protocol = edited(protocol, remove=("Set operation to add, update, or remove. ",), replace=(
            (_JOINT, "jointly propose historical access and an execution decision"),
            (_WAIT, "Wait for the requested information before taking actions that require it."),
        ))
        return _three_blocks(protocol)

    def input_template_text(self) -> str:
        """FlowState's input with Full Context's ``<trajectory_history>`` block after ``<agent_status>``."""
        full_context = template("full_context_input")
        end = "</trajectory_history>\n"
        history = full_context[: full_context.index(end) + len(end)]
        return edited(super().input_template_text(), replace=(("</agent_status>\n", "</agent_status>\n" + history),))

    async def begin_request(self, request: RequestStart) -> None:
        await super().begin_request(request)
        self._request, self._step = request.index, 0
        self.trajectory = Trajectory()
        self.trajectory.add_request(request.index, request.query)

    def input_slots(self) -> dict[str, str]:
        return {**super().input_slots(), "full_trajectory": self.trajectory.text()}

    def apply_output(self, parsed: ParsedOutput) -> StepEffects:
        self._step += 1
        self.trajectory.add_output(self._request, self._step, parsed)
        return super().apply_output(parsed)

    async def add_observation(self, step: int, content: str, summary: str) -> Observation:
        observation = await super().add_observation(step, content, summary)
        self.trajectory.observe(observation)
        return observation

    async def end_request(self, outcome: RequestOutcome) -> None:
        self.runtime.end_request([response_node(outcome, self.runtime.observation_ids())])


def response_node(outcome: RequestOutcome, observations: list[str]) -> StateNode:
    """``request_<k>_response``: the request's final response, derived from its observations."""
    response = outcome.final_response
    return StateNode(
        state_id=f"request_{outcome.index}_response", type=StateType.JUDGEMENT,
        summary=response[:RESPONSE_SUMMARY_CHARS] if response else NO_RESPONSE, value=response,
        refs=tuple(Ref(rel=RelationType.DERIVES, state_id=obs) for obs in observations),
        source_request=outcome.index, origin=Origin.RULE,
    )
