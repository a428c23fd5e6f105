"""The graders, rule by rule (CONTRACT §3.3–3.4, §4.7, §5.5–5.6, §6; checklist 1–12, 16)."""

from __future__ import annotations

import pytest

from pipeline.benchmarks.memoryarena import scoring
from pipeline.benchmarks.memoryarena.data import FormalTask, ShoppingTask, TravelTask
from pipeline.benchmarks.memoryarena.subtasks import plan_text
from tests.pipeline.benchmarks.memoryarena.conftest import catalog, example_tasks

SIX = {"transportation": "Flight F1", "breakfast": "Cafe A, X", "attraction": "Park, X;", "lunch": "Diner B, X",
       "dinner": "Grill C, X", "accommodation": "Inn D, X"}


def day(number: int, **slots: str) -> dict:
    return {"days": number, "current_city": "X", **SIX, **slots}


def travel(base: list[dict], answers: list[list[dict]], names: tuple[str, ...] = ("Al", "Bo")) -> TravelTask:
    return TravelTask.model_validate({
        "id": 1, "base_person": {"name": "Jo", "query": "I am Jo. q", "daily_plans": base},
        "questions": [f"I am {n}.\n q" for n in names[: len(answers)]], "answers": answers})


# -- formal reasoning ---------------------------------------------------------------------------------
def test_the_judge_prompt_and_its_substring_verdict() -> None:  # checklist 11
    prompt = scoring.judge_prompt("The answer is $3$.", "$3$")
    assert prompt == ("\n            You are a math expert. \n            Determine if these two expressions are mathematically "
                      "equivalent answer for the given question:\n            Question: None\n            Expression 1: "
                      "The answer is $3$.\n            Expression 2: $3$\n\n            Respond only with \"yes\" or "
                      "\"no\". ")
    system = "You are a helpful assistant that judges the equivalence of two mathematical expressions."  # §3.3
    assert scoring.judge_messages("The answer is $3$.", "$3$") == [{"role": "system", "content": system},
                                                                   {"role": "user", "content": prompt}]
    verdicts = {"yes": True, " YES.": True, "no, in the eyes of the law": True, "I did this yesterday: no": True,
                "No, they differ": False, "y": False, "": False}
    assert {reply: scoring.judge_verdict(reply) for reply in verdicts} == verdicts


def test_formal_sr_is_the_last_subtask_and_ps_averages_per_task() -> None:  # checklist 12, 16
    three = FormalTask(id=1, paper_name="a", questions=["q"] * 3, answers=["a1", "a2", "a3"], backgrounds=[""] * 3)
    two = FormalTask(id=2, paper_name="b", questions=["q"] * 2, answers=["b1", "b2"], backgrounds=[""] * 2)
    first = scoring.grade_formal(three, [("x", "yes"), ("x", "no"), ("x", "yes")])
    second = scoring.grade_formal(two, [("x", "yes"), None])  # no answer: wrong, not judged
    assert (first.solved, first.progress, second.solved, second.progress) == (True, 2 / 3, False, 0.5)
    assert second.subtasks[1].judge_prompt is None and "Expression 2: a1" in first.subtasks[0].judge_prompt
    agg = scoring.formal_aggregate([first, second])
    assert (agg["SR"], agg["PS"]) == (0.5, (2 / 3 + 0.5) / 2)
    assert agg["acc_at_k"] == [1.0, 0.0, 1.0]  # k = 3: only the first task has three subtasks
    assert agg["cumulative_acc_at_k"] == [1.0, 0.5, 3 / 5]


# -- group travel --------------------------------------------------------------------------------------
def test_similarity_compares_prefixes_and_dashes() -> None:  # checklist 4
    assert scoring.similarity("coco", "Coco Bambu, Rockford") == 1.0
    assert scoring.similarity("Flight Number: F3573659", "Flight Number: F3573659, from A to B, ...") == 1.0
    assert scoring.similarity("-", "-") == 1.0 and scoring.similarity("-", "Cafe") == 0.0
    assert scoring.similarity("", "-") == 0.0 and scoring.similarity(None, "x") == 0.0 and scoring.similarity(" ", "x") == 0.0
    assert scoring.similarity("abcd", "abxy") == 0.5


def test_plan_parsing_rules() -> None:  # checklist 3
    assert scoring.parse_plan("") is None and scoring.parse_plan("Max Token Length Exceeded.") is None
    assert scoring.parse_plan("no days here") is None
    plan = scoring.parse_plan("Day 1:\nBreakfast: A: B\n**Lunch:** C\nnot a pair\nBreakfast: later wins\nDay2:\nDinner: D")
    assert plan == [{"day": 1, "breakfast": "later wins", "**lunch": "** C"}, {"day": 2, "dinner": "D"}]
    assert scoring.parse_plan("DAY 1:\nBreakfast: A") is None and scoring.parse_plan("Day 1 (March 16):\nx: y") is None


def test_the_last_block_of_a_name_anywhere_is_scored() -> None:  # checklist 1, 2
    base = [day(1)]
    task = travel(base, [[day(1, breakfast="Other, X")], [day(1)]])
    right = plan_text("Al", [day(1, breakfast="Other, X")])
    assert scoring.grade_travel(task, [right, ""]).subtasks[0].passed
    # a later traveller's output re-states Al's plan, wrongly: that block is the one scored
    restated = plan_text("Bo", [day(1)]) + "\n" + plan_text("Al", [day(1)])
    assert not scoring.grade_travel(task, [right, restated]).subtasks[0].passed
    # the header must match the parsed name exactly
    assert not scoring.grade_travel(task, [right.replace("=== Al's", "=== al's"), ""]).subtasks[0].passed
    assert not scoring.grade_travel(task, [right.replace("'s Plan", "'s plan"), ""]).subtasks[0].passed
    # Bo has no block of its own, but the base plan is Bo's plan too: Bo's section is absent, so Bo fails
    assert not scoring.grade_travel(task, [right, ""]).subtasks[1].passed


def test_six_slots_for_passing_seven_for_the_env_reward() -> None:  # checklist 5
    task = travel([day(1)], [[day(1)]])
    wrong_city = plan_text("Al", [{**day(1), "current_city": "Elsewhere"}])
    result = scoring.grade_travel(task, [wrong_city])
    assert result.subtasks[0].passed and not result.subtasks[0].env_reward
    assert scoring.grade_travel(task, [plan_text("Al", [day(1)])]).subtasks[0].env_reward


def test_missing_keys_count_as_dash_and_nulls_as_no_value() -> None:
    missing = {"days": 1, "current_city": "X"}  # every slot missing: "-" on both sides
    assert scoring.grade_travel(travel([day(1)], [[missing]]), [plan_text("Al", [missing])]).subtasks[0].passed
    null = {**day(1), "lunch": None}
    assert not scoring.grade_travel(travel([day(1)], [[null]]), [plan_text("Al", [null])]).subtasks[0].passed


def test_constraint_slots_differ_from_the_base_and_sps_skips_travellers_without_any() -> None:  # checklist 6
    base = [day(1), day(2)]
    al = [day(1, breakfast="Other, X"), day(2, dinner="Steak, X")]  # two constraint slots
    bo = [day(1), day(2)]  # none: same as the base
    task = travel(base, [al, bo])
    half = [day(1, breakfast="Other, X"), day(2)]  # one of Al's two constraints met
    result = scoring.grade_travel(task, [plan_text("Al", half), plan_text("Bo", bo)])
    al_result, bo_result = result.subtasks
    assert (al_result.constraint_slots, al_result.constraint_passed, al_result.passed) == (2, 1, False)
    assert (bo_result.constraint_slots, bo_result.passed) == (0, True)
    assert result.soft_progress == 0.5  # Bo has no constraint slots: skipped
    only_bo = scoring.grade_travel(travel(base, [bo], names=("Bo",)), [plan_text("Bo", bo)])
    agg = scoring.travel_aggregate([result, only_bo])
    assert only_bo.soft_progress is None and agg["sPS"] == 0.5  # a group without any is skipped too
    assert agg["PS"] == 2 / 3 and agg["PS_task_mean"] == (0.5 + 1.0) / 2  # micro-average vs per-task mean
    assert agg["acc_at_k"] == [0.5, 1.0]
    # GT days without a base day contribute no constraint slots
    assert scoring.constraint_slots([day(1)], [day(2, breakfast="New, X")]) == []


def test_the_examples_score_one_with_their_gold_plans_and_zero_without() -> None:
    tasks = example_tasks("group_travel_planner")
    gold = [scoring.grade_travel(t, [plan_text(t.questions[k].split(".")[0][5:], a) for k, a in enumerate(t.answers)])
            for t in tasks]
    empty = [scoring.grade_travel(t, []) for t in tasks]
    assert scoring.travel_aggregate(gold)["SR"] == 1.0 and scoring.travel_aggregate(empty)["PS"] == 0.0
    assert [r.soft_progress for r in gold][3:] == [1.0, None]  # 1004: one traveller without slots; 1005: only such


# -- bundled shopping -----------------------------------------------------------------------------------
def test_purchase_reasons_and_case_insensitive_asins() -> None:  # checklist 7
    cat = catalog()
    target = "B0SYNA0101"
    assert scoring.grade_step(1, target.lower(), target, ["x"], cat).reason == "asin_match"
    none = scoring.grade_step(1, "", target, ["x"], cat)
    assert (none.reward, none.reason, none.success) == (0.0, "no_purchase", False)
    assert scoring.grade_step(1, None, target, [], cat).reason == "no_purchase"


def test_a_non_target_product_with_every_attribute_can_succeed() -> None:  # checklist 7, 8
    cat = {"T": {"name": "Acme Red Kettle 1.7 Liter", "product_category": "Home › Kitchen › Kettles"},
           "P": {"name": "Acme red kettle, 1.7-liter, steel", "product_category": "Home › Kitchen › Kettles"}}
    step = scoring.grade_step(1, "P", "T", ["red", "1.7 liter"], cat)
    assert (step.reason, step.num_attr_matches, step.r_type, step.success) == ("computed", 2, 1.0, True)
    assert step.name_similarity == 1.0 and step.category_similarity == 1.0


def test_r_type_rules_apply_in_order() -> None:  # checklist 8
    words = [f"w{i}" for i in range(20)]  # the target's 20 tokens: name similarity divides by them

    def r_type(shared: int, category: str) -> float:
        cat = {"T": {"name": " ".join(words), "product_category": "A › B"},
               "P": {"name": " ".join([*words[:shared], "other"]), "product_category": category}}
        return scoring.grade_step(1, "P", "T", ["x"], cat).r_type

    assert r_type(6, "Z") == 1.0  # name 0.3 > 0.2
    assert r_type(4, "Z") == 0.5  # name 0.2 is not > 0.2, category 0
    assert r_type(4, "A › Z") == 1.0  # category 0.5 >= 0.5
    assert r_type(2, "Z") == 0.5  # name 0.1 is not < 0.1
    assert r_type(1, "A › B") == 0.1  # name 0.05 < 0.1 overrides the category
    assert r_type(0, "A › B") == 0.0  # name 0: the last rule wins


def test_the_attribute_judge_gets_one_line_per_attribute() -> None:  # §5.5 (the templates: prompts.json)
    system, user = scoring.attribute_judge_messages("Mixing Bowls, Set of 5", ["Set of 5", "glass"])
    assert system == {"role": "system", "content": "You are a strict product-attribute judge. Use only the product name. "
                                                   "If an attribute is not explicitly stated, answer false. Return JSON only."}
    assert user == {"role": "user", "content": 'Product name:\nMixing Bowls, Set of 5\n\nAttributes:\n- Set of 5\n- glass\n\n'
                                               'Return JSON: {"matches":[{"attribute":"...","has_attribute":true/false}]}'}


def test_string_mode_matches_normalised_substrings() -> None:  # checklist 8
    assert scoring.string_matches(["Set of 5", "Stain-less/Steel", "", "blue"], "A set of 50 stain less steel pans") == 2
    assert scoring.tokens("Coffee-Maker/12 cup") == {"coffee", "maker", "12", "cup"}
    assert scoring.category_segments(" Home ›  › Kitchen ") == {"home", "kitchen"}


@pytest.mark.parametrize(("reply", "matches"), [
    ('{"matches": [{"attribute": "Red", "has_attribute": true}, {"attribute": "large", "has_attribute": true}]}', 2),
    ('```json\n{"matches": [{"attribute": "red", "has_attribute": true}]}\n```', 1),
    ('Sure! {"matches": [{"attribute": "red", "has_attribute": "true"}]} done', 0),  # a string is not true
    ('{"matches": [{"attribute": "red", "has_attribute": true}, {"attribute": "RED", "has_attribute": false}]}', 0),
    ('{"matches": {"attribute": "red"}}', None),  # not a list
    ("no json at all", None),
    ('{"matches": [1, {"attribute": "large", "has_attribute": true}]}', 1),
])
def test_llm_judge_replies_are_parsed_as_upstream(reply: str, matches: int | None) -> None:  # checklist 9
    assert scoring.judge_reply_matches(reply, ["red", "Large"]) == matches


def test_an_unusable_reply_is_asked_three_times_then_counts_nothing() -> None:
    calls: list[str] = []

    def judge(name: str, attributes: object) -> str:
        calls.append(name)
        return "garbage"

    cat = {"T": {"name": "red kettle"}, "P": {"name": "red kettle"}}
    step = scoring.grade_step(1, "P", "T", ["red"], cat, judge=judge)
    assert (len(calls), step.num_attr_matches, step.reward) == (3, 0, 0.0)
    assert scoring.grade_step(1, "P", "T", [], cat, judge=judge).num_attr_matches == 0 and len(calls) == 3  # no call


def test_shopping_aggregates() -> None:
    answers = [{"target_asin": "A", "attributes": []}, {"target_asin": "B", "attributes": []}]
    task = ShoppingTask.model_validate({"id": 1, "category": "c", "questions": ["q"] * 2, "answers": answers})
    full = scoring.grade_shopping(task, [{"purchased_asin": "a"}, {"purchased_asin": "B"}], {})
    half = scoring.grade_shopping(task, [{"purchased_asin": "A"}], {})
    agg = scoring.shopping_aggregate([full, half])
    assert (agg["SR"], agg["PS"], agg["acc_at_k"], agg["avg_reward"]) == (0.5, 0.75, [1.0, 0.5], 0.75)
    assert agg["avg_success_rate_by_position"] == 0.75
    examples = [scoring.grade_shopping(t, [{"purchased_asin": a.target_asin} for a in t.answers], catalog())
                for t in example_tasks("bundled_shopping")]
    assert scoring.shopping_aggregate(examples)["SR"] == 1.0
