"""The loader (CONTRACT §1): file order, note lines skipped, only the listed fields required, and every
malformed row an error naming the file, the line and the field."""

from __future__ import annotations

import json

import pytest

from pipeline.benchmarks.memoryarena.data import Config, MemoryArenaDataError, load_tasks, parse_tasks
from tests.pipeline.benchmarks.memoryarena.conftest import example_tasks

FORMAL = {"id": 7, "paper_name": "p", "questions": ["q1", "q2"], "answers": ["a1", "a2"], "backgrounds": ["b", ""]}
DAY = {"days": 1, "current_city": "A", "transportation": "-", "breakfast": "-", "attraction": "-", "lunch": "-",
       "dinner": "-", "accommodation": "-"}
TRAVEL = {"id": 1, "base_person": {"name": "Jo", "query": "I am Jo. q", "daily_plans": [DAY]},
          "questions": ["I am Al.\n q"], "answers": [[DAY]]}
SHOPPING = {"id": 0, "category": "baking_item_0", "questions": ["Product 1: x"],
            "answers": [{"target_asin": "B0", "attributes": ["red"]}]}


def lines(*rows: object) -> str:
    return "\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n"


def test_the_examples_load_in_file_order_with_their_ids() -> None:
    assert [t.id for t in example_tasks("formal_reasoning_math")] == [900, 901, 902, 903]
    assert [t.id for t in example_tasks("group_travel_planner")] == [1001, 1002, 1003, 1004, 1005]
    assert [t.id for t in example_tasks("bundled_shopping")] == [900, 901, 902]
    assert all(len(t.questions) == 6 for t in example_tasks("bundled_shopping"))


def test_notes_blank_lines_and_extra_fields_are_ignored() -> None:
    text = lines("# a note", {**FORMAL, "id": 3, "extra": {"ignored": True}}, "", "  ", FORMAL)
    assert [t.id for t in parse_tasks(text, "formal_reasoning_math", "f.jsonl")] == [3, 7]  # ids, not lines (checklist 20)
    [travel] = parse_tasks(lines(TRAVEL), "group_travel_planner", "t.jsonl")
    assert travel.answers[0][0] == DAY  # days kept as the file has them (missing keys and nulls differ)
    [shop] = parse_tasks(lines(SHOPPING), "bundled_shopping", "s.jsonl")
    assert shop.answers[0].target_asin == "B0"


@pytest.mark.parametrize(("row", "config", "message"), [
    ("{not json", "formal_reasoning_math", r"f.jsonl:2: not a JSON object"),
    ("[1, 2]", "formal_reasoning_math", r"f.jsonl:2: a task is a JSON object, got list"),
    ({**FORMAL, "id": "7"}, "formal_reasoning_math",
     r"f.jsonl:2: formal_reasoning_math task: id: Input should be a valid integer"),
    ({k: v for k, v in FORMAL.items() if k != "backgrounds"}, "formal_reasoning_math",
     r"f.jsonl:2: .*backgrounds: Field required"),
    ({**FORMAL, "answers": ["only one"]}, "formal_reasoning_math", r"f.jsonl:2: .*must have the same length"),
    ({**FORMAL, "questions": []}, "formal_reasoning_math", r"f.jsonl:2: .*questions: List should have at least 1 item"),
    ({**FORMAL, "questions": ["q", 3]}, "formal_reasoning_math", r"f.jsonl:2: .*questions.1: Input should be a valid string"),
    ({**TRAVEL, "base_person": {"name": "Jo", "query": "q"}}, "group_travel_planner", r"base_person.daily_plans: Field required"),
    ({**TRAVEL, "answers": [["not a day"]]}, "group_travel_planner", r"answers.0.0: Input should be a valid dictionary"),
    ({**SHOPPING, "answers": [{"attributes": []}]}, "bundled_shopping", r"answers.0.target_asin: Field required"),
    (FORMAL, "formal_reasoning_math", r"f.jsonl:2: task id 7 repeats line 1"),
])
def test_a_malformed_row_names_the_file_line_and_field(row: object, config: Config, message: str) -> None:
    first = FORMAL if config.startswith("formal") else (TRAVEL if config == "group_travel_planner" else SHOPPING)
    with pytest.raises(MemoryArenaDataError, match=message):
        parse_tasks(lines(first, row), config, "f.jsonl")


def test_a_missing_file_says_how_to_get_it(tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(MemoryArenaDataError, match="flowstate data fetch memoryarena"):
        load_tasks(tmp_path / "none.jsonl", "formal_reasoning_math")
