"""The episode environment: transcript, step and error limits, stop tokens (TOOLS.md §6)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from flowstate import LoopLimits, RequestEnd, TaskPrompt, new_session, run_episode
from flowstate.environment import Environment, ToolCall
from pipeline.benchmarks.taubench import (
    GREETING,
    EpisodeEndedError,
    ScriptedUser,
    TauEpisode,
    UserSimulator,
    get_task,
    grade,
    load_tasks,
)
from pipeline.benchmarks.taubench.episode import DEFAULT_MAX_ERRORS, DEFAULT_MAX_STEPS
from pipeline.benchmarks.transcript import TranscriptMessage
from tests.flowstate.fixtures import ScriptedPolicyFixture

from .conftest import gold_hashes


class ListUser:
    """A test fixture user that sends prepared messages in order (then keeps asking)."""

    def __init__(self, *messages: str) -> None:
        self.messages = list(messages)
        self.seen: list[list[TranscriptMessage]] = []

    async def reply(self, transcript: Sequence[TranscriptMessage]) -> str:
        self.seen.append(list(transcript))
        return self.messages.pop(0) if self.messages else "What else?"


def episode(user: UserSimulator, task_id: str = "7", *, max_steps: int = DEFAULT_MAX_STEPS,
            max_errors: int = DEFAULT_MAX_ERRORS) -> TauEpisode:
    return TauEpisode(get_task("airline", task_id), user, max_steps=max_steps, max_errors=max_errors)


def run(coroutine):  # noqa: ANN001, ANN201 - tiny test helper
    return asyncio.run(coroutine)


def test_the_loop_drives_it_and_its_step_limit_ends_the_episode() -> None:
    """τ-bench keeps the loop's default request ending: tools never end a request, and reaching the
    per-request step limit ends the episode (max_steps) rather than starting another request."""
    env = episode(ListUser("Please cancel XEHM4B."))
    assert isinstance(env, Environment) and env.request_done is False
    lookup = '<tool_calls>[{"name": "get_reservation_details", "arguments": {"reservation_id": "XEHM4B"}}]</tool_calls>'
    result = run(run_episode(new_session("full_context", TaskPrompt(task_policy="p", available_tools="t")),
                             ScriptedPolicyFixture([lookup] * 2), env, limits=LoopLimits(max_steps_per_request=2)))
    assert (result.termination, result.requests, len(result.steps)) == ("max_steps", 1, 2)
    assert [m.role for m in env.transcript] == ["assistant", "user", "assistant", "tool", "assistant", "tool"]
    assert run(env.end_request(RequestEnd.STEP_LIMIT)) is None and env.termination is None


def test_transcript_requests_ids_and_live_db() -> None:
    env = episode(ListUser("Please cancel XEHM4B.", "Thanks ###STOP###"))
    assert run(env.first_request()) == "Please cancel XEHM4B."
    results = run(env.execute([
        ToolCall(name="get_reservation_details", arguments={"reservation_id": "XEHM4B"}),
        ToolCall(name="cancel_reservation", arguments={"reservation_id": "XEHM4B"}, id="mine"),
        ToolCall(name="nope", arguments={}),
    ]))
    assert [r.error for r in results] == [False, False, True]
    assert run(env.respond("Cancelled.")) is None
    assert env.termination == "user_stop"
    roles = [(m.role, m.request) for m in env.transcript]
    assert roles == [("assistant", 0), ("user", 1), ("assistant", 1), ("tool", 1), ("tool", 1), ("tool", 1),
                     ("assistant", 1), ("user", 2)]
    assert env.transcript[0].content == GREETING == "Hi! How can I help you today?"
    calls = env.transcript[2].tool_calls
    assert calls is not None and [c.id for c in calls] == ["call_1", "mine", "call_2"]
    assert env.transcript[2].content is None
    assert [m.tool_call_id for m in env.transcript[3:6]] == ["call_1", "mine", "call_2"]
    assert env.transcript[5].error and env.transcript[5].content == "Error: Tool 'nope' not found."
    assert env.transcript[-1].content == "Thanks ###STOP###"  # the stop message is kept
    assert env.db["reservations"]["XEHM4B"]["status"] == "cancelled"
    assert (env.steps, env.errors) == (5, 1)
    with pytest.raises(EpisodeEndedError):
        run(env.respond("more"))


def test_the_user_sees_the_transcript_so_far() -> None:
    user = ListUser("hello", "###STOP###")
    env = episode(user)
    run(env.first_request())
    run(env.respond("How can I help?"))
    assert [m.content for m in user.seen[0]] == [GREETING]
    assert [m.content for m in user.seen[1]] == [GREETING, "hello", "How can I help?"]


@pytest.mark.parametrize("token", ["###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###"])
def test_stop_tokens_end_the_episode_at_once(token: str) -> None:
    env = episode(ListUser(f"Bye {token} now"))
    assert run(env.first_request()) is None
    assert env.termination == "user_stop"
    assert env.transcript[-1].content == f"Bye {token} now"


def test_max_steps_counts_user_agent_and_environment_steps() -> None:
    env = episode(ListUser(), max_steps=5)
    assert run(env.first_request()) == "What else?"  # step 1
    assert run(env.respond("a")) == "What else?"  # steps 2, 3
    assert run(env.respond("b")) is None  # steps 4, 5
    assert env.termination == "max_steps" and env.steps == 5


def test_no_limit_check_between_a_tool_call_message_and_its_results() -> None:
    env = episode(ListUser(), max_steps=2)
    run(env.first_request())
    results = run(env.execute([ToolCall(name="list_all_airports", arguments={})]))
    assert len(results) == 1 and env.transcript[-1].role == "tool"  # results delivered and recorded
    assert env.termination == "max_steps" and env.steps == 3


def test_agent_text_step_can_hit_the_limit_before_the_user_answers() -> None:
    user = ListUser()
    env = episode(user, max_steps=2)
    run(env.first_request())
    assert run(env.respond("hi")) is None
    assert env.termination == "max_steps" and len(user.seen) == 1


def test_too_many_errors_wins_over_max_steps() -> None:
    env = episode(ListUser(), max_errors=2)
    run(env.first_request())
    run(env.execute([ToolCall(name="x", arguments={})]))
    assert env.termination is None
    run(env.execute([ToolCall(name="get_user_details", arguments={"user_id": 1})]))
    assert env.termination == "too_many_errors" and env.errors == 2
    both = episode(ListUser(), max_errors=2, max_steps=3)
    run(both.first_request())
    run(both.execute([ToolCall(name="x", arguments={}), ToolCall(name="y", arguments={})]))
    assert both.steps == 3 and both.termination == "too_many_errors"


def test_limits_override_a_stop_in_the_same_step() -> None:
    env = episode(ListUser("hi", "###STOP###"), max_steps=3)
    run(env.first_request())
    assert run(env.respond("hello")) is None
    assert env.termination == "max_steps"  # upstream checks the limits after the stop step too


def test_empty_messages() -> None:
    env = episode(ListUser("  "))
    assert run(env.first_request()) is None
    assert env.termination == "user_error" and len(env.transcript) == 1
    later = episode(ListUser("hi", ""))
    run(later.first_request())
    assert run(later.respond("yes?")) is None and later.termination == "user_error"
    agent = episode(ListUser("hi"))
    run(agent.first_request())
    assert run(agent.respond("")) is None and agent.termination == "agent_error"


def test_misuse_is_an_error() -> None:
    env = episode(ListUser("hi"))
    with pytest.raises(EpisodeEndedError):
        run(env.respond("too early"))
    run(env.first_request())
    with pytest.raises(EpisodeEndedError):
        run(env.first_request())
    with pytest.raises(ValueError):
        run(env.execute([]))


def test_episodes_do_not_share_state() -> None:
    first, second = episode(ListUser("hi")), episode(ListUser("hi"))
    run(first.first_request())
    run(first.execute([ToolCall(name="cancel_reservation", arguments={"reservation_id": "XEHM4B"})]))
    assert second.db["reservations"]["XEHM4B"]["status"] is None
    assert second.db.canonical_hash() == gold_hashes()["airline"]["initial_hash"]


async def oracle(env: TauEpisode) -> None:
    """A minimal gold-action agent (test fixture): every gold call, then a final statement."""
    criteria = env.task.evaluation_criteria
    if await env.first_request() is None:
        return
    for action in criteria.actions:
        await env.execute([ToolCall(name=action.name, arguments=action.arguments)])
        if env.termination:
            return
    reply = await env.respond("All done. " + " ".join(criteria.communicate_info))
    while reply is not None:
        reply = await env.respond("Is there anything else?")


def test_scripted_user_with_an_oracle_passes_every_task_classic_basis() -> None:
    async def all_tasks() -> list[tuple[str, str, float, str | None]]:
        outcomes = []
        for domain in ("airline", "retail"):
            for task in load_tasks(domain):
                env = TauEpisode(task, ScriptedUser(task))
                await oracle(env)
                info = await grade(task, env.transcript, env.termination or "none", basis="classic")
                outcomes.append((domain, task.id, info.reward, env.termination))
        return outcomes

    outcomes = run(all_tasks())
    assert len(outcomes) == 164
    assert [o for o in outcomes if o[2] != 1.0 or o[3] != "user_stop"] == []


def test_scripted_user_answers_and_stops() -> None:
    task = get_task("retail", "0")
    user = ScriptedUser(task, max_turns=3)
    greeting = [TranscriptMessage(role="assistant", content=GREETING)]
    opening = run(user.reply(greeting))
    assert task.user_scenario.instructions.reason_for_call in opening and "Yusuf Rossi" in opening
    asked = [*greeting, TranscriptMessage(role="user", content=opening),
             TranscriptMessage(role="assistant", content="What is your email?")]
    assert "19122" in run(user.reply(asked))
    confirm = [*asked[:2], TranscriptMessage(role="assistant", content="Shall I proceed (yes/no)?")]
    assert run(user.reply(confirm)).startswith("Yes")
    done = [*asked[:2], TranscriptMessage(role="assistant", content="Your exchange is requested.")]
    assert "###STOP###" in run(user.reply(done))
    many = [*asked[:2], *[TranscriptMessage(role="user", content="x")] * 3, asked[2]]
    assert "###STOP###" in run(user.reply(many))
