"""Episode outcomes as rows: every column accounted for, calls in call order, #Tok defined once."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from flowstate import Completion, EpisodeResult, MethodRecord, StepClock, StepRecord, TokenUsage, method_options
from pipeline.benchmarks.base import Grade, RequestGrade
from pipeline.benchmarks.taubench import TauBenchCell
from pipeline.core.roles import Role
from pipeline.core.specs import AgentModel, Cell, EpisodeSpec
from pipeline.run.calls import CallFault, CallLog
from pipeline.run.episode import EpisodeOutcome
from pipeline.run.rows import failure_rows, grade_columns, outcome_rows, role_tokens, tok
from pipeline.store.schema import EPISODES, FAULTS, SCHEMAS, rows_table

SPEC = EpisodeSpec(
    episode_id="e1", sweep_id="s", task_id="7", trial=0, seed=3, user_simulator="scripted", judge="none",
    cell=Cell(cell_id="c1", label="taubench.airline.flowstate.m", benchmark=TauBenchCell(domain="airline"),
              method=method_options("flowstate"), agent=AgentModel(deployment="m")))


def usage(prompt: int, completion: int) -> TokenUsage:
    return TokenUsage(prompt_tokens=prompt, completion_tokens=completion)


def test_a_failure_row_has_every_column_and_no_score() -> None:
    [row] = failure_rows(SPEC, error="ModelUnavailableError: down", attempts=3, code_version="v")["episodes"]
    assert list(row) == EPISODES.names
    assert (row["status"], row["termination"], row["graded"], row["reward"], row["metrics"]) == (
        "failed", "infrastructure_error", False, None, None)
    assert json.loads(row["benchmark_options_json"])["domain"] == "airline"
    assert grade_columns(None) == {"reward": None, "success": None, "graded": False, "grading_basis": None,
                                   "metrics": None, "grading_json": None}


def test_the_method_s_own_calls_count_in_tok_on_the_steps_they_belong_to() -> None:
    log = CallLog()
    log.clock = StepClock()

    def call(caller: Role, request: int, step: int, tokens: tuple[int, int], in_step: bool = True) -> None:
        log.clock.request, log.clock.step = request, step
        log.add(caller, in_step, [], "", usage(*tokens), 0.1, None, None)

    call("user_simulator", 0, 0, (50, 5), in_step=False)
    call("memory", 1, 0, (10, 1))  # retrieval before request 1's first step
    call("agent", 1, 1, (100, 10))
    call("agent", 1, 2, (120, 12))
    call("memory", 1, 2, (20, 2))  # written at the end of request 1
    call("judge", 0, 0, (70, 7), in_step=False)
    steps = [StepRecord(request=1, step=t, prompt_tokens=p, completion_tokens=c) for t, p, c in ((1, 100, 10), (2, 120, 12))]
    outcome = EpisodeOutcome(
        spec=SPEC, result=EpisodeResult(termination="user_stop", requests=1, steps=steps, exchanges=[],
                                        records=[MethodRecord(kind="retrieval", request=1, step=0, payload={"ids": [2]})]),
        transcript=[], grade=Grade(reward=1.0, success=True, basis="b", metrics={"db": 1.0},
                                   requests=[RequestGrade(request=1, correct=True, reason="ok")]),
        calls=log.calls, started_at=datetime.now(UTC), finished_at=datetime.now(UTC), duration_s=1.0)
    rows = outcome_rows(outcome, attempts=1, code_version="v")
    assert set(rows) == set(SCHEMAS)
    assert [(s["step"], s["memory_calls"], s["memory_prompt_tokens"]) for s in rows["steps"]] == [(1, 1, 10), (2, 1, 20)]
    [episode] = rows["episodes"]
    assert episode["tokens"] == 100 + 10 + 120 + 12 + 10 + 1 + 20 + 2  # agent + memory, never user or judge
    assert (episode["user_simulator_prompt_tokens"], episode["judge_completion_tokens"]) == (50, 7)
    assert [(m["seq"], m["caller"], m["request"]) for m in rows["messages"]] == [
        (0, "user_simulator", None), (1, "memory", 1), (2, "agent", 1), (3, "agent", 1), (4, "memory", 1), (5, "judge", None)]
    assert [(r["request"], r["correct"], r["reason"]) for r in rows["request_outcomes"]] == [(1, True, "ok")]
    assert [(r["kind"], json.loads(r["payload_json"])) for r in rows["method_records"]] == [("retrieval", {"ids": [2]})]


def test_tok_is_none_when_nothing_was_reported() -> None:
    columns = role_tokens([])
    assert tok(columns) is None and columns["embeddings_tokens"] is None
    assert Completion(text="").usage.prompt_tokens is None


def fault(episode_attempt: int, attempt: int, kind: str = "server_error", retried: bool = True) -> CallFault:
    return CallFault(kind=kind, http_status=503 if kind == "server_error" else None, attempt=attempt, latency_s=0.2,
                     message="Error code: 503 - overloaded", served_by="http://127.0.0.1:1/v1", retried=retried,
                     episode_attempt=episode_attempt, caller="agent", request=1, step=2, deployment="big")


def test_faults_of_every_attempt_are_rows_in_order_with_a_finished_episode_and_with_a_failure() -> None:
    failed_attempt = [fault(1, 1), fault(1, 2, retried=False)]
    outcome = EpisodeOutcome(
        spec=SPEC, result=EpisodeResult(termination="user_stop", requests=1, steps=[], exchanges=[]), transcript=[],
        grade=None, calls=[], faults=[fault(2, 1, kind="timeout")], started_at=datetime.now(UTC),
        finished_at=datetime.now(UTC), duration_s=1.0)
    finished = outcome_rows(outcome, attempts=2, code_version="v", earlier_faults=failed_attempt)["faults"]
    assert [(r["seq"], r["episode_attempt"], r["attempt"], r["kind"], r["retried"]) for r in finished] == [
        (0, 1, 1, "server_error", True), (1, 1, 2, "server_error", False), (2, 2, 1, "timeout", True)]
    assert {(r["episode_id"], r["cell_id"], r["caller"], r["request"], r["step"], r["deployment"]) for r in finished} == {
        ("e1", "c1", "agent", 1, 2, "big")}
    assert rows_table(finished, FAULTS).column("http_status").to_pylist() == [503, 503, None]  # every column typed
    failure = failure_rows(SPEC, error="ModelUnavailableError: down", attempts=1, code_version="v",
                           faults=failed_attempt)
    assert [(r["seq"], r["episode_id"], r["retried"]) for r in failure["faults"]] == [(0, "e1", True), (1, "e1", False)]
    assert failure_rows(SPEC, error="x", attempts=1, code_version="v")["faults"] == []
