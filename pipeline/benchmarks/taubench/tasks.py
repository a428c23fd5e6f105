"""τ-bench task records (``tasks.json``) as validated, immutable models."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Instructions(_Frozen):
    domain: Literal["airline", "retail"]
    reason_for_call: str
    known_info: str | None
    unknown_info: str | None
    task_instructions: str


class UserScenario(_Frozen):
    persona: str | None
    instructions: Instructions


class GoldAction(_Frozen):
    action_id: str
    name: str
    arguments: dict[str, Any]
    info: str | None = None
    # Argument names compared by the action check; ``None`` = the predicted call's own names.
    compare_args: list[str] | None = None


# The components grading can compute (no airline/retail task uses env assertions).
RewardComponent = Literal["DB", "COMMUNICATE", "NL_ASSERTION", "ACTION"]


class EvaluationCriteria(_Frozen):
    actions: list[GoldAction]
    communicate_info: list[str]
    nl_assertions: list[str] | None
    reward_basis: list[RewardComponent]


class Task(_Frozen):
    id: str
    description: dict[str, Any] | None
    user_scenario: UserScenario
    initial_state: None
    evaluation_criteria: EvaluationCriteria
    # Upstream bookkeeping, unused by simulation and grading.
    annotations: Any = None
    issues: list[dict[str, Any]] | None = None

    @property
    def domain(self) -> Literal["airline", "retail"]:
        return self.user_scenario.instructions.domain
