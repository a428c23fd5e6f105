"""The benchmark layer's errors: what a user can act on derives from flowstate.FlowStateError (the CLI
prints it as one line, exit 2); a grading failure is an outcome the run records, not a user error."""

from __future__ import annotations

import asyncio

import pytest

from flowstate import FlowStateError
from pipeline.benchmarks.base import (
    BenchmarkOptionError,
    EpisodeRecord,
    GradingError,
    JudgeRequiredError,
    UnknownTaskError,
)
from pipeline.benchmarks.memoryarena.benchmark import MEMORYARENA, MemoryArenaCell
from pipeline.benchmarks.memoryarena.contract_formats import AnswersError, grade_answers
from pipeline.benchmarks.memoryarena.data import MemoryArenaDataError
from pipeline.benchmarks.memoryarena.shopping.productdb import ProductDbError
from pipeline.benchmarks.method_data import MethodFetchError
from pipeline.benchmarks.taubench.benchmark import TAUBENCH, TauBenchCell
from pipeline.benchmarks.taubench.data import TauBenchDataError
from pipeline.benchmarks.taubench.domains import get_task
from pipeline.benchmarks.taubench.schema_derivation import ToolSourceError

EMPTY = EpisodeRecord(transcript=[], termination="user_stop")
TRAVEL = MemoryArenaCell(domain="group_travel_planner", source="examples")


@pytest.mark.parametrize("error", [TauBenchDataError, ToolSourceError, MemoryArenaDataError, ProductDbError,
                                   MethodFetchError, AnswersError, BenchmarkOptionError, UnknownTaskError])
def test_missing_data_fetch_failures_and_bad_options_are_user_errors(error: type[Exception]) -> None:
    assert issubclass(error, FlowStateError)


def test_a_grading_failure_is_a_recorded_outcome_not_a_user_error() -> None:
    """The run keeps the episode ungraded with the message; `flowstate grade` counts missing judges."""
    assert not issubclass(GradingError, FlowStateError)
    assert not issubclass(JudgeRequiredError, FlowStateError)


def test_a_task_id_that_does_not_exist_is_named() -> None:
    with pytest.raises(UnknownTaskError, match=r"taubench airline has no tasks \['nope'\]"):
        TAUBENCH.task_ids(TauBenchCell(domain="airline", tasks=["0", "nope"]))
    with pytest.raises(UnknownTaskError, match="No retail task with id 'nope'"):  # `flowstate taubench replay --task`
        get_task("retail", "nope")
    with pytest.raises(UnknownTaskError, match=r"memoryarena group_travel_planner \(examples\) has no tasks \['nope'\]"):
        MEMORYARENA.task_ids(TRAVEL.model_copy(update={"tasks": ["nope"]}))
    with pytest.raises(UnknownTaskError, match="has no task 'nope'"):
        MEMORYARENA.expected_episode(TRAVEL, "nope")


def test_roles_and_grading_bases_a_benchmark_refuses_are_user_errors() -> None:
    """Still ValueErrors too: job validation (pydantic) reports them against the job's key."""
    with pytest.raises(BenchmarkOptionError, match="taubench needs a user_simulator"):
        TAUBENCH.check_roles(TauBenchCell(domain="airline"), {})
    with pytest.raises(BenchmarkOptionError, match="judges every answer"):
        MEMORYARENA.check_roles(MemoryArenaCell(domain="formal_reasoning_math", source="examples"), {})
    task = TAUBENCH.task_ids(TauBenchCell(domain="airline"))[0]
    with pytest.raises(BenchmarkOptionError, match="not 'db'"):  # `flowstate grade --basis db`
        asyncio.run(TAUBENCH.grade(TauBenchCell(domain="airline"), task, EMPTY, None, basis="db"))
    with pytest.raises(BenchmarkOptionError, match="--basis does not apply"):
        asyncio.run(MEMORYARENA.grade(TRAVEL, MEMORYARENA.task_ids(TRAVEL)[0], EMPTY, None, basis="task"))
    assert issubclass(BenchmarkOptionError, ValueError)


def test_answers_in_another_shape_are_a_user_error() -> None:
    with pytest.raises(AnswersError, match="ANSWERS.json is for env 'bundled_shopping'"):
        grade_answers("group_travel_planner", [], {"env": "bundled_shopping", "tasks": {}})
