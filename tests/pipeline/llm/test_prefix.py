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


# -- exact accounting from token ids ------------------------------------------------------------------
def test_common_prefix_and_added_pieces() -> None:
    from pipeline.llm.prefix import _diff_text, added_pieces, common_prefix

    assert common_prefix([1, 2, 3, 4], [1, 2, 9]) == 2 and common_prefix([1, 2], [1, 2, 3]) == 2
    assert common_prefix([], [1]) == 0
    before = _diff_text([SYSTEM, ChatMessage(role="user", content="state: a\nobs 1")])
    after = _diff_text([SYSTEM, ChatMessage(role="user", content="state: a, b\nobs 1\nobs 2")])
    assert added_pieces(before, after) == ["state: a, b\n", "obs 2\n"]  # each run of changed lines, once
    assert added_pieces("", after) == ["You are terse.\nstate: a, b\nobs 1\nobs 2\n"]  # headers are not content


def test_the_ledger_gives_the_reusable_prefix_on_one_replica_and_the_physical_limit() -> None:
    from pipeline.llm.prefix import PromptLedger

    ledger = PromptLedger()
    assert ledger.added([ASK]) == ["What is 2+2?\n"]
    assert ledger.account("r1", [1, 2, 3], [4], [ASK], "4", added_tokens=3) == (0, 0)  # the first call
    follow = [ASK, ChatMessage(role="assistant", content="4"), ChatMessage(role="user", content="And 3+3?")]
    assert ledger.added(follow) == ["And 3+3?\n"]  # diffed against the prompt and its reply
    # append-only: the previous prompt and completion are reusable; only the new content is added
    assert ledger.account("r1", [1, 2, 3, 4, 5, 6], [7], follow, "6", added_tokens=2) == (4, 4)
    # a re-rendered prompt: little of it is a prefix, though most of its content is old
    assert ledger.account("r1", [1, 9, 3, 4, 5, 6, 7, 8], [], follow, "", added_tokens=2) == (1, 6)
    # another replica holds nothing of this conversation
    assert ledger.account("r2", [1, 9, 3], [], follow, "", added_tokens=0) == (0, 3)
