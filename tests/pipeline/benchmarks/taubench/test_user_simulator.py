"""User-simulator prompt rendering and role flip (TOOLS.md §6.2–6.3)."""

from __future__ import annotations

import asyncio
import json
import re

from flowstate.chat import ChatMessage
from pipeline.benchmarks.taubench import (
    LLMUserSimulator,
    get_task,
    is_stop,
    render_scenario,
    simulation_guidelines,
    user_messages,
    user_system_prompt,
)
from pipeline.benchmarks.transcript import TranscriptMessage, TranscriptToolCall

from .conftest import FixedReplyPolicy, contract, data_dir


def contract_example() -> str:
    match = re.search(r"Example \(airline 7\):\s*`(\".*?\")`", contract(), re.DOTALL)
    assert match, "the §6.2 example is missing from TOOLS.md"
    return json.loads(match.group(1))


def test_scenario_rendering_matches_the_contract_example() -> None:
    rendered = render_scenario(get_task("airline", "7"))
    pieces = contract_example().split(" ...")
    assert rendered.startswith(pieces[0])
    position = 0
    for piece in pieces:
        position = rendered.index(piece, position) + len(piece)
    assert "\n\n\t\tYou are sick.\n\n" in rendered  # blank lines inside a field stay empty
    assert "Unknown info" not in rendered  # null fields are left out


def test_system_prompt_is_guidelines_then_scenario() -> None:
    guidelines = (data_dir() / "taubench" / "user_simulator" / "simulation_guidelines.md").read_text()
    assert simulation_guidelines() == guidelines
    task = get_task("retail", "0")
    prompt = user_system_prompt(task, guidelines)
    assert prompt == guidelines + "\n\n<scenario>\n" + render_scenario(task) + "\n</scenario>"
    assert "\n\n\n<scenario>\nInstructions:\n\tDomain: retail\n" in prompt
    assert "\tUnknown info:\n\t\tYou do not remember your email address.\n" in prompt


def test_persona_comes_first() -> None:
    task = get_task("airline", "7")
    with_persona = task.model_copy(update={"user_scenario": task.user_scenario.model_copy(update={"persona": "Calm.\nOld."})})
    assert render_scenario(with_persona) == "Persona:\n\tCalm.\n\tOld.\n" + render_scenario(task)


CONVERSATION = [
    TranscriptMessage(role="assistant", content="Hi! How can I help you today?"),
    TranscriptMessage(role="user", content="Cancel my trip.", request=1),
    TranscriptMessage(role="assistant", content="checking", request=1,
                      tool_calls=[TranscriptToolCall(id="c1", name="get_user_details", arguments={})]),
    TranscriptMessage(role="tool", content="{}", tool_call_id="c1", request=1),
    TranscriptMessage(role="assistant", content="Which reservation?", request=1),
    TranscriptMessage(role="user", content="XEHM4B", request=2),
]


def test_role_flip_hides_tool_traffic() -> None:
    messages = user_messages(get_task("airline", "7"), "G", CONVERSATION)
    assert [(m.role, m.content) for m in messages[1:]] == [
        ("user", "Hi! How can I help you today?"),
        ("assistant", "Cancel my trip."),
        ("user", "Which reservation?"),
        ("assistant", "XEHM4B"),
    ]
    assert messages[0] == ChatMessage(role="system", content=user_system_prompt(get_task("airline", "7"), "G"))
    first = user_messages(get_task("airline", "7"), "G", CONVERSATION[:1])
    assert [m.role for m in first] == ["system", "user"]


def test_llm_user_simulator_sends_the_rendered_messages() -> None:
    policy = FixedReplyPolicy("I want to cancel. ###STOP###")
    task = get_task("airline", "7")
    reply = asyncio.run(LLMUserSimulator(policy, task).reply(CONVERSATION[:1]))
    assert reply == "I want to cancel. ###STOP###"
    assert policy.calls == [user_messages(task, simulation_guidelines(), CONVERSATION[:1])]


def test_stop_tokens_are_substrings() -> None:
    assert is_stop("thanks ###STOP###")
    assert is_stop("###TRANSFER###")
    assert is_stop("bye###OUT-OF-SCOPE###!")
    assert not is_stop("###stop###")
    assert not is_stop("STOP")
