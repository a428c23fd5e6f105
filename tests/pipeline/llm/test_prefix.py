"""The cached-token estimate for llama.cpp: rendering, shared prefixes, scaling."""

from __future__ import annotations

from flowstate.chat import ChatMessage
from pipeline.llm.prefix import PrefixMemory, estimate_cached_tokens, render_prompt

SYSTEM = ChatMessage(role="system", content="You are terse.")
ASK = ChatMessage(role="user", content="What is 2+2?")


def test_render_is_deterministic_and_ends_in_an_open_assistant_turn() -> None:
    text = render_prompt([SYSTEM, ASK])
    assert text == render_prompt([SYSTEM, ASK])
    assert text.index("You are terse.") < text.index("What is 2+2?")
    assert text.endswith("<|assistant|>\n")


def test_a_follow_up_shares_the_previous_prompt_and_completion() -> None:
    memory = PrefixMemory()
    first = render_prompt([SYSTEM, ASK])
    assert memory.observe("r1", first, "4") == 0
    follow_up = render_prompt([SYSTEM, ASK, ChatMessage(role="assistant", content="4"),
                               ChatMessage(role="user", content="And 3+3?")])
    shared = memory.observe("r1", follow_up, "6")
    assert shared == len(first) + 1  # the completion "4" was evaluated too, its end marker not
    assert follow_up[:shared] == first + "4"


def test_an_interleaved_conversation_breaks_the_prefix_per_replica_only() -> None:
    memory = PrefixMemory()
    a = render_prompt([SYSTEM, ASK])
    b = render_prompt([ChatMessage(role="user", content="Unrelated")])
    memory.observe("r1", a, "4")
    memory.observe("r2", b, "x")  # another replica: does not disturb r1
    assert memory.observe("r1", a, "4") == len(a)
    memory.observe("r1", b, "x")  # same replica: the next prompt of a shares only the role marker
    assert memory.observe("r1", a, "4") == len("<|")


def test_forget_starts_a_replica_afresh() -> None:
    memory = PrefixMemory()
    memory.observe("r1", "abc", "d")
    memory.forget("r1")
    assert memory.observe("r1", "abc", "d") == 0


def test_estimate_scales_shared_characters_by_the_prompt_token_ratio() -> None:
    assert estimate_cached_tokens(100, 500, 1000) == 50
    assert estimate_cached_tokens(100, 2000, 1000) == 100  # never more than the prompt
    assert estimate_cached_tokens(None, 10, 100) is None
    assert estimate_cached_tokens(10, 0, 0) is None
