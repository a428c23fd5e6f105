"""Where a prompt departs from the previous call of its conversation (flowstate.prompt_blocks), and
the template parsing it rests on (flowstate.prompts.slot_spans)."""

from __future__ import annotations

import pytest

from flowstate import ChatMessage
from flowstate.prompt_blocks import departure, value_change
from flowstate.prompts import fill, slot_spans


def test_slot_spans_inverts_fill():
    text = "<a>\n{one}\n</a>\n{two}\n<b>\n{three}\n</b>"
    filled = fill(text, {"one": "x\ny", "two": "", "three": "{z}"})
    spans = slot_spans(text, filled)
    assert {name: filled[s:e] for name, (s, e) in spans.items()} == {"one": "x\ny", "two": "", "three": "{z}"}
    with pytest.raises(ValueError, match="not a filling"):
        slot_spans(text, "something else")


def test_departure_names_the_system_message_and_none_when_all_repeats():
    template = "<q>\n{query}\n</q>"
    one = [ChatMessage(role="system", content="rules"), ChatMessage(role="user", content="<q>\nhi\n</q>")]
    assert departure([*one, ChatMessage(role="assistant", content="ok")], one, template) is None
    other = [ChatMessage(role="system", content="rules 2"), one[1]]
    where = departure(one, other, template)
    assert (where.message, where.offset, where.block, where.change) == (0, 5, "system", "changed")
    where = departure(one, [one[0], ChatMessage(role="user", content="<q>\nhi there\n</q>")], template)
    assert (where.message, where.offset, where.block, where.change) == (1, 6, "query", "appended")


@pytest.mark.parametrize(("old", "new", "change"), [
    ("[]", '[\n{"state_id": "a"}\n]', "appended"),
    ('[\n{"state_id": "a"}\n]', '[\n{"state_id": "a"},\n{"state_id": "b"}\n]', "appended"),
    ('[\n{"state_id": "a", "v": 1},\n{"state_id": "b"}\n]', '[\n{"state_id": "a", "v": 2},\n{"state_id": "b"}\n]', "changed"),
    ('[\n{"state_id": "a", "v": 1},\n{"state_id": "b"}\n]', '[\n{"state_id": "b"},\n{"state_id": "a", "v": 2}\n]', "changed"),
    ('[\n{"state_id": "a"}\n]', '[\n{"state_id": "h"},\n{"state_id": "a"}\n]', "inserted"),
    ('[\n{"state_id": "a"},\n{"state_id": "b"}\n]', '[\n{"state_id": "b"}\n]', "removed"),
    ('[\n{"state_id": "a"},\n{"state_id": "b"}\n]', '[\n{"state_id": "a"}\n]', "removed"),
    ('[\n{"state_id": "a"},\n{"state_id": "b"}\n]', '[\n{"state_id": "b"},\n{"state_id": "a"}\n]', "moved"),
    ("history line 1", "history line 1\nline 2", "appended"),
    ("None", "observation_id: obs_1_1\n{}", "replaced"),
])
def test_value_change(old, new, change):
    assert value_change(old, new) == change
