"""Subtask texts and memory entries, byte for byte (CONTRACT §2, §3.1, §3.5, §4.1–4.2, §5.1, §5.4; checklist 10, 13)."""

from __future__ import annotations

import json

from pipeline.benchmarks.memoryarena.data import ShoppingTask, TravelTask
from pipeline.benchmarks.memoryarena.environments import FormalEpisode
from pipeline.benchmarks.memoryarena.subtasks import (
    base_memory_entry,
    base_plan_text,
    fill,
    formal_memory_entry,
    formal_prompt,
    shopping_memory_entry,
    shopping_prompts,
    travel_user_message,
    traveller_memory_entry,
    traveller_name,
    wrap_memory,
)
from tests.pipeline.benchmarks.memoryarena.conftest import example_tasks

INDENT = " " * 12


def test_formal_prompt_has_the_12_space_template_and_the_placeholder() -> None:
    assert formal_prompt("Find x.", "Let x = 2.") == (
        f"\n{INDENT}### BACKGROUND:\n{INDENT}Let x = 2.\n{INDENT}### PROBLEM:\n{INDENT}Find x.")
    assert formal_prompt("Find x.", "") == (
        f"\n{INDENT}### BACKGROUND:\n{INDENT}No information provided.\n{INDENT}### PROBLEM:\n{INDENT}Find x.")
    # braces in the texts are not markers, and what is inserted is never substituted again
    text = formal_prompt("Show {task} holds.", "{background} and {task}")
    assert text.endswith(f"{{background}} and {{task}}\n{INDENT}### PROBLEM:\n{INDENT}Show {{task}} holds.")


def test_formal_prompt_is_the_question_alone_when_it_carries_its_own_sections() -> None:
    for question in ("### BACKGROUND:\nx\n### PROBLEM:\ny", "Solve it. ### PROBLEM: y"):
        assert formal_prompt(question, "ignored background") == question


def test_travel_names_messages_base_plan_and_memory() -> None:
    assert traveller_name("I am Eric.\n I'm joining Jennifer.") == "Eric"
    assert traveller_name("Hello, I am Eric.") == "Person" and traveller_name("I am Mary-Ann.") == "Person"
    message = travel_user_message("Eric", "I am Eric.\n q")
    assert message.startswith("Create a travel plan for Eric.\n\nQuery: I am Eric.\n q\n\nInstructions:")
    assert 'starting with "=== Eric\'s Plan ==="' in message
    task = TravelTask.model_validate({
        "id": 1, "base_person": {"name": "Jo", "query": "I am Jo. Go.", "daily_plans": [
            {"days": 1, "current_city": "from A to B", "transportation": "Flight F1", "breakfast": "-", "attraction": "-",
             "lunch": "-", "dinner": "D, B", "accommodation": "H, B"},
            {"days": 0, "day": 2, "current_city": "B"}]},  # days falsy: day; missing keys: "-"
        "questions": ["I am Al.\n q"], "answers": [[]]})
    # BASE: its lines joined with "\n", so it ends with one, the last day's empty line (§4.1)
    base = ("=== Jo's Plan ===\nDay 1:\nCurrent City: from A to B\nTransportation: Flight F1\nBreakfast: -\n"
            "Attraction: -\nLunch: -\nDinner: D, B\nAccommodation: H, B\n\nDay 2:\nCurrent City: B\nTransportation: -\n"
            "Breakfast: -\nAttraction: -\nLunch: -\nDinner: -\nAccommodation: -\n")
    assert base_plan_text(task) == base
    # json.dumps with Python's default separators, not ASCII-escaped
    assert base_memory_entry(task) == ('{"name": "Jo", "query": "I am Jo. Go.", "is_base_person": true, "final_plan": '
                                       + json.dumps(base) + "}")
    names = TravelTask.model_validate({**task.model_dump(), "base_person": {**task.base_person.model_dump(), "name": "Zoë"}})
    assert base_memory_entry(names).startswith('{"name": "Zoë", "query"') and "=== Zoë's Plan ===" in base_memory_entry(names)


def test_the_first_example_travel_base_plan() -> None:
    task = example_tasks("group_travel_planner")[0]
    text = base_plan_text(task)
    assert text.startswith("=== Jennifer's Plan ===\nDay 1:\nCurrent City: from St. Petersburg to Rockford\n"
                           "Transportation: Flight Number: F3573659, from St. Petersburg to Rockford, Departure Time: "
                           "15:40, Arrival Time: 17:04\n")
    assert text.endswith("Accommodation: -\n") and not text.endswith("\n\n")


def test_shopping_instructions_follow_the_split_rules() -> None:
    task = ShoppingTask.model_validate({"id": 5, "category": "home_item_1", "questions": [
        "RULES ONE\nproduct 1:\nBuy a mug.", "IGNORED PREFIX\nPRODUCT 2: Buy a lid.\nProduct 3 is next", "x"],
        "answers": [{"target_asin": "A", "attributes": []}] * 3})
    header = "*** What You Need to Buy at Current Step ***"
    reminder = ("You only need to buy the item for this step; use the ground-truth items in Purchase History as "
                "references and follow the requirements to buy the correct item.")
    first, second, third = shopping_prompts(task)
    assert first == f"RULES ONE\n\n{header}\n{reminder}\n\nproduct 1:\nBuy a mug.\n\n{'-' * 64}\n"
    # the header as written in the text; the prefix only from the first question
    assert second == f"RULES ONE\n\n{header}\n{reminder}\n\nPRODUCT 2:\nBuy a lid.\nProduct 3 is next\n\n{'-' * 64}\n"
    assert third == f"RULES ONE\n\n{header}\n{reminder}\n\nProduct 3:\n"  # absent section: "Product k:\n"


def test_the_example_shopping_instructions_end_in_a_newline_and_keep_the_rule_line() -> None:
    task = example_tasks("bundled_shopping")[0]
    prompts = shopping_prompts(task)
    assert len(prompts) == 6 and all(p.endswith("\n") for p in prompts)
    assert all(p.rstrip("\n").endswith("-" * 64) for p in prompts[:5]) and not prompts[5].rstrip().endswith("-" * 64)
    assert prompts[1].count("*** What You Need to Buy at Current Step ***") == 1 and "Product 1:" not in prompts[1]


def test_memory_entries_and_the_wrapper() -> None:
    assert formal_memory_entry("Q", "A", []) == "## Task: Q\n## solution: A\n"
    trace = [{"name": "reasoning", "input": "x", "ok": True, "n": None}]
    assert formal_memory_entry("Q", "A", trace) == (
        "## Task: Q\n## solution: A\n## Tool Calls Info: [{'name': 'reasoning', 'input': 'x', 'ok': True, 'n': None}]\n")
    assert shopping_memory_entry(2, "page", "click[b0]", "next", False) == (
        "Step 2:\nUser Instruction: page\nAgent Action: click[b0]\nEnv Observation: next\nDone: False")
    assert wrap_memory(None, "hi") == "<memory_context>\nNone\n</memory_context>\nUser: hi"
    assert wrap_memory("M", "hi") == "<memory_context>\nM\n</memory_context>\nUser: hi"
    assert FormalEpisode(example_tasks("formal_reasoning_math")[0], None).initial_memory() == ["Initial result: Empty\n"]
    # a traveller (§4.2): json.dumps with Python's default separators, not ASCII-escaped
    pad = [{"step_idx": 0, "thought": None, "final_output": None, "tool_calls": [{"id": "c1", "name": "CitySearch",
            "args": {"state": "Texas"}}], "tool_results": [{"tool_call_id": "c1", "name": "CitySearch", "result": "Austin"}]},
           {"step_idx": 1, "thought": "Zoë's", "final_output": "Zoë's"}]
    assert traveller_memory_entry("Zoë", "I am Zoë.\n q", pad, "Zoë's") == (
        '{"name": "Zoë", "query": "I am Zoë.\\n q", "scratchpad": [{"step_idx": 0, "thought": null, "final_output": null, '
        '"tool_calls": [{"id": "c1", "name": "CitySearch", "args": {"state": "Texas"}}], "tool_results": [{"tool_call_id": '
        '"c1", "name": "CitySearch", "result": "Austin"}]}, {"step_idx": 1, "thought": "Zoë\'s", "final_output": "Zoë\'s"}], '
        '"final_plan": "Zoë\'s"}')
    assert fill("{a}{b}{a}", {"a": "{b}", "b": "2"}) == "{b}2{b}"
