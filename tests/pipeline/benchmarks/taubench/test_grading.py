"""Grading (TOOLS.md §7): gate, DB, COMMUNICATE, NL_ASSERTION, ACTION, bases and pass^k."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from flowstate.chat import ChatMessage
from pipeline.benchmarks.taubench import (
    JudgeOutputError,
    JudgeRequiredError,
    ReplayMismatchError,
    RewardInfo,
    Task,
    exec_calls,
    get_task,
    grade,
    judge_messages,
    pass_hat_k,
)
from pipeline.benchmarks.transcript import TranscriptMessage, TranscriptToolCall

from .conftest import FixedReplyPolicy, contract


def verdicts(*met: bool) -> str:
    return json.dumps({"results": [{"expectedOutcome": f"o{i}", "reasoning": "r", "metExpectation": value}
                                   for i, value in enumerate(met)]})


def transcript_for(task: Task, calls: list[tuple[str, Any]], *texts: str) -> list[TranscriptMessage]:
    """Greeting, one user message, the calls with their real results, then the agent's texts."""
    messages = [TranscriptMessage(role="assistant", content="Hi! How can I help you today?"),
                TranscriptMessage(role="user", content="help", request=1)]
    outputs = exec_calls(task.domain, [{"name": name, "arguments": arguments} for name, arguments in calls])["outputs"]
    for index, ((name, arguments), output) in enumerate(zip(calls, outputs, strict=True)):
        call_id = f"call_{index}"
        messages.append(TranscriptMessage(role="assistant", request=1,
                                          tool_calls=[TranscriptToolCall(id=call_id, name=name, arguments=arguments)]))
        messages.append(TranscriptMessage(role="tool", content=output["content"], error=output["error"],
                                          tool_call_id=call_id, request=1))
    messages += [TranscriptMessage(role="assistant", content=text, request=1) for text in texts]
    return messages


def gold_calls(task: Task) -> list[tuple[str, Any]]:
    return [(action.name, action.arguments) for action in task.evaluation_criteria.actions]


def graded(*args: Any, **kwargs: Any) -> RewardInfo:
    return asyncio.run(grade(*args, **kwargs))


@pytest.mark.parametrize("termination", ["max_steps", "too_many_errors", "user_error", "agent_error", "timeout"])
def test_gate_gives_zero_without_evaluating(termination: str) -> None:
    task = get_task("retail", "16")
    judge = FixedReplyPolicy(verdicts(True))
    info = graded(task, transcript_for(task, gold_calls(task)), termination, judge=judge)
    assert (info.reward, info.graded, info.components, info.db) == (0.0, False, {}, None)
    assert judge.calls == []


def test_db_component() -> None:
    task = get_task("airline", "7")
    info = graded(task, transcript_for(task, gold_calls(task), "Total is $1,628."), "user_stop")
    assert info.components["DB"] == 1.0 and info.db is not None and info.db.match
    assert info.reward == 1.0 and info.basis == "task" and info.reward_basis == ["DB", "COMMUNICATE"]
    wrong = graded(task, transcript_for(task, gold_calls(task)[:-1], "Total is $1,628."), "agent_stop")
    assert wrong.components["DB"] == 0.0 and wrong.reward == 0.0
    assert wrong.db is not None and wrong.db.predicted_hash != wrong.db.gold_hash


def test_read_only_task_fails_on_a_state_change_but_not_on_a_failed_write() -> None:
    task = get_task("airline", "0")  # gold DB == initial DB
    harmless = graded(task, transcript_for(task, [("cancel_reservation", {"reservation_id": "NOPE"}),
                                                  ("get_user_details", {"user_id": "x"})]), "user_stop")
    assert harmless.components["DB"] == 1.0
    harmful = graded(task, transcript_for(task, [("send_certificate", {"user_id": "mia_li_3668", "amount": 1})]),
                     "user_stop")
    assert harmful.components["DB"] == 0.0


def test_communicate_comma_rule_and_roles() -> None:
    task = get_task("airline", "7")  # communicate_info == ["1628"]
    calls = gold_calls(task)
    assert graded(task, transcript_for(task, calls, "It comes to $1,628 in total."), "user_stop").components[
        "COMMUNICATE"] == 1.0
    assert graded(task, transcript_for(task, calls, "It comes to $1.628 in total."), "user_stop").components[
        "COMMUNICATE"] == 0.0
    from_user = transcript_for(task, calls, "Done.")
    from_user.append(TranscriptMessage(role="user", content="so 1628?", request=2))
    assert graded(task, from_user, "user_stop").components["COMMUNICATE"] == 0.0
    info = graded(task, transcript_for(task, calls, "done"), "user_stop")
    assert [(c.info, c.met) for c in info.communicate_checks] == [("1628", False)]
    multi = get_task("airline", "14")  # ["327", "1000", "1786"]
    text = "Refund 327, certificate 1,000 and total 1786"
    assert graded(multi, transcript_for(multi, gold_calls(multi), text), "user_stop").components["COMMUNICATE"] == 1.0


def test_nl_assertion_judge_messages_are_exact() -> None:
    task = get_task("retail", "16")
    assertions = task.evaluation_criteria.nl_assertions
    assert assertions
    transcript = transcript_for(task, gold_calls(task)[:1], "Done, it's sorted.")
    judge = FixedReplyPolicy(verdicts(*[True] * len(assertions)))
    info = graded(task, transcript, "user_stop", judge=judge)
    assert info.components["NL_ASSERTION"] == 1.0 and info.reward_basis == ["DB", "NL_ASSERTION"]
    assert info.judge_raw == judge.reply and len(info.nl_assertion_checks) == len(assertions)
    (system, user), = judge.calls
    literal = next(line.strip()[1:-1] for line in contract().splitlines() if line.startswith('  `"\\n        TASK'))
    assert system == ChatMessage(role="system", content=json.loads(literal))
    rendered = "\n".join(f"{m.role}: {m.content}" for m in transcript)
    assert "assistant: None\ntool: " in rendered
    assert user.content == ("\n        conversation:\n        " + rendered + "\n        \n        expectedOutcomes:\n"
                            "        " + repr(list(assertions)) + "\n        ")
    assert judge_messages(transcript, assertions) == [system, user]


def test_nl_assertion_outcomes() -> None:
    task = get_task("retail", "16")
    transcript = transcript_for(task, gold_calls(task), "ok")
    one_false = graded(task, transcript, "user_stop", judge=FixedReplyPolicy(verdicts(True, False)))
    assert one_false.components["NL_ASSERTION"] == 0.0 and one_false.reward == 0.0
    assert graded(task, transcript, "user_stop", judge=FixedReplyPolicy('{"results": []}')).reward == 1.0
    lax = '{"results": [{"expectedOutcome": "a", "reasoning": "b", "metExpectation": "true"}], "extra": 1}'
    assert graded(task, transcript, "user_stop", judge=FixedReplyPolicy(lax)).components["NL_ASSERTION"] == 1.0


@pytest.mark.parametrize("reply", [
    "not json", "```json\n{\"results\": []}\n```", '{"results": [{"metExpectation": true,}]}', "[]",
    '{"results": [{"expectedOutcome": "a", "metExpectation": true}]}', '{"results": "all good"}',
])
def test_judge_garbage_is_a_typed_error(reply: str) -> None:
    task = get_task("retail", "16")
    with pytest.raises(JudgeOutputError) as caught:
        graded(task, transcript_for(task, []), "user_stop", judge=FixedReplyPolicy(reply))
    assert caught.value.raw == reply


def test_judge_needed_and_not_needed() -> None:
    task = get_task("retail", "16")
    with pytest.raises(JudgeRequiredError):
        graded(task, transcript_for(task, []), "user_stop")
    no_assertions = get_task("retail", "0")
    assert not no_assertions.evaluation_criteria.nl_assertions
    judge = FixedReplyPolicy("never used")
    info = graded(no_assertions, transcript_for(no_assertions, gold_calls(no_assertions)), "user_stop", judge=judge)
    assert info.components["NL_ASSERTION"] == 1.0 and info.reward == 1.0 and judge.calls == []
    db_only = get_task("retail", "33")
    assert graded(db_only, transcript_for(db_only, gold_calls(db_only)), "user_stop").reward_basis == ["DB"]


def test_classic_basis_never_calls_the_judge() -> None:
    task = get_task("retail", "16")
    judge = FixedReplyPolicy(verdicts(False))
    assert task.evaluation_criteria.communicate_info == ["8276.23"]
    transcript = transcript_for(task, gold_calls(task), "Your refunds total 8276.23.")
    info = graded(task, transcript, "user_stop", judge=judge, basis="classic")
    assert judge.calls == [] and "NL_ASSERTION" not in info.components
    assert info.basis == "classic" and info.reward_basis == ["DB", "COMMUNICATE"] and info.reward == 1.0
    silent = graded(task, transcript_for(task, gold_calls(task), "Done."), "user_stop", judge=judge, basis="classic")
    assert silent.reward == 0.0 and silent.components["COMMUNICATE"] == 0.0


def test_action_checks_and_accuracies() -> None:
    task = get_task("airline", "7")  # 2 reads, 3 writes
    calls = gold_calls(task)
    partial = [calls[0], ("get_reservation_details", {"reservation_id": "59XX6W", "extra": 1}), calls[2], calls[3]]
    info = graded(task, transcript_for(task, partial), "user_stop")
    assert [c.matched for c in info.action_checks] == [True, False, True, True, False]
    assert (info.read_accuracy, info.write_accuracy) == (0.5, 2 / 3)
    assert info.components["ACTION"] == 0.0
    # With no compare_args the predicted call's own argument names are compared.
    subset = [("get_reservation_details", {})]
    assert graded(task, transcript_for(task, subset), "user_stop").action_checks[0].matched
    transfer = get_task("airline", "13")  # its transfer action has compare_args []
    check = graded(transfer, transcript_for(transfer, [("transfer_to_human_agents", {"summary": "anything"})]),
                   "user_stop").action_checks
    assert [c.matched for c in check if c.name == "transfer_to_human_agents"] == [True]
    assert all(c.kind == "generic" for c in check if c.name == "transfer_to_human_agents")


def test_replay_mismatch_is_detected() -> None:
    task = get_task("airline", "7")
    transcript = transcript_for(task, gold_calls(task), "$1628")
    tampered = [m.model_copy(update={"content": "Error: something else"})
                if m.role == "tool" and m.tool_call_id == "call_3" else m for m in transcript]
    with pytest.raises(ReplayMismatchError):
        graded(task, tampered, "user_stop")
    reformatted = [m.model_copy(update={"content": json.dumps(json.loads(m.content), indent=1)})
                   if m.role == "tool" and m.tool_call_id == "call_3" else m for m in transcript]
    assert graded(task, reformatted, "user_stop").reward == 1.0  # equal once parsed as JSON


def test_pass_hat_k() -> None:
    trials = {"a": [True, True, False], "b": [True, False, False], "c": [False, False, False, True]}
    assert pass_hat_k(trials, 1) == pytest.approx((2 / 3 + 1 / 3 + 1 / 4) / 3)
    assert pass_hat_k(trials, 2) == pytest.approx((1 / 3 + 0 + 0) / 3)
    assert pass_hat_k(trials, 3) == 0.0
    assert pass_hat_k({"x": [True, True]}, 2) == 1.0
    for k in (0, 4):
        with pytest.raises(ValueError):
            pass_hat_k(trials, k)
    with pytest.raises(ValueError):
        pass_hat_k({}, 1)
