"""The three commands with exactly CONTRACT §8–9's input and output formats, through the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pipeline.benchmarks.memoryarena.subtasks import plan_text
from pipeline.cli.main import main
from tests.pipeline.benchmarks.memoryarena.conftest import MEMORYARENA, TRAVEL_DB, catalog, example_tasks

EXAMPLES = MEMORYARENA / "examples"


def run(tmp_path: Path, env: str, answers: dict, tasks: Path | None = None) -> dict:
    (tmp_path / "answers.json").write_text(json.dumps(answers))
    tasks = tasks or EXAMPLES / f"{env}.synthetic.jsonl"
    assert main(["memoryarena", "grade", "--env", env, "--tasks", str(tasks), "--answers", str(tmp_path / "answers.json"),
                 "--out", str(tmp_path / "out.json")]) == 0
    return json.loads((tmp_path / "out.json").read_text())


def test_formal_out(tmp_path: Path) -> None:
    [first, *_] = example_tasks("formal_reasoning_math")
    answers = {"env": "formal_reasoning_math", "tasks": {"900": {"subtasks": [
        {"response": "$f'(x)=3x^2-3$", "judge_output": "yes"}, None, {"response": "", "judge_output": "Yes."}]}}}
    out = run(tmp_path, "formal_reasoning_math", answers)
    assert out["env"] == "formal_reasoning_math" and [t["id"] for t in out["tasks"]] == [900, 901, 902, 903]
    task = out["tasks"][0]
    assert (task["solved"], task["progress"], task["soft_progress"]) == (True, 2 / 3, None)
    assert [s["index"] for s in task["subtasks"]] == [1, 2, 3]
    assert task["subtasks"][1] == {"index": 2, "correct": False, "judge_prompt": None}
    assert "Expression 1: \n" in task["subtasks"][2]["judge_prompt"]  # an empty answer is still judged
    assert out["tasks"][1]["progress"] == 0.0  # absent from ANSWERS: nothing produced, still counted
    agg = out["aggregate"]
    assert (agg["n_tasks"], agg["n_subtasks"], agg["SR"], agg["PS"]) == (4, 12, 0.25, 2 / 3 / 4)
    assert set(agg) == {"n_tasks", "n_subtasks", "SR", "PS", "acc_at_k", "cumulative_acc_at_k"}


def test_travel_out(tmp_path: Path) -> None:
    task = example_tasks("group_travel_planner")[0]
    names = ["Eric", "Emma", "Michael", "Sophia"]
    responses = [{"response": plan_text(n, gt)} for n, gt in zip(names, task.answers, strict=True)]
    out = run(tmp_path, "group_travel_planner", {"env": "group_travel_planner", "tasks": {"1001": {"subtasks": responses}}})
    first = out["tasks"][0]
    assert (first["id"], first["solved"], first["progress"], first["soft_progress"]) == (1001, True, 1.0, 1.0)
    sub = first["subtasks"][0]
    assert list(sub) == ["index", "name", "pass", "env_reward", "constraint_slots", "constraint_passed", "plan"]
    assert (sub["name"], sub["pass"], sub["constraint_slots"]) == ("Eric", True, 1)
    assert sub["plan"][0]["day"] == 1 and sub["plan"][0]["current_city"] == "from St. Petersburg to Rockford"
    assert out["tasks"][1]["subtasks"][0]["plan"] is None  # no output: no plan
    agg = out["aggregate"]
    assert set(agg) == {"n_tasks", "n_subtasks", "SR", "PS", "PS_task_mean", "sPS", "acc_at_k"}
    assert (agg["SR"], agg["PS"]) == (0.2, 4 / 13)


def test_shopping_out_with_catalog_names_and_judge_replies(tmp_path: Path) -> None:
    task = example_tasks("bundled_shopping")[0]
    target = task.answers[1].target_asin
    steps = [{"purchased_asin": task.answers[0].target_asin.lower()},
             {"purchased_asin": "B0NOTINCAT", "purchased_name": catalog()[target]["name"],
              "judge_response": json.dumps({"matches": [{"attribute": a, "has_attribute": True}
                                                        for a in task.answers[1].attributes]})},
             {"purchased_asin": None}, None]
    cat = {k.lower(): {"name": v["name"], "product_category": v["product_category"]} for k, v in catalog().items()}
    out = run(tmp_path, "bundled_shopping", {"env": "bundled_shopping", "tasks": {"900": {"subtasks": steps}}, "catalog": cat})
    subs = out["tasks"][0]["subtasks"]
    assert [s["reason"] for s in subs] == ["asin_match", "computed", "no_purchase", "no_purchase", "no_purchase", "no_purchase"]
    assert list(subs[1]) == ["index", "reward", "success", "reason", "r_type", "num_attr_matches", "name_similarity",
                             "category_similarity"]
    assert subs[1]["num_attr_matches"] == len(task.answers[1].attributes) and subs[1]["category_similarity"] == 0.0
    assert set(out["aggregate"]) == {"n_tasks", "n_subtasks", "SR", "PS", "acc_at_k", "avg_reward",
                                     "avg_success_rate_by_position"}


@pytest.mark.parametrize(("answers", "message"), [
    ({"env": "group_travel_planner"}, "not 'formal_reasoning_math'"),
    ({"tasks": {"900": {"subtasks": [{"response": "x"}]}}}, r"tasks\[900\].subtasks\[0\]: .*response and judge_output"),
    ({"tasks": {"900": {"subtasks": ["yes"]}}}, r"expected an object or null, got str"),
    ({"tasks": {"900": {"subtasks": {"0": None}}}}, "expected a list"),
])
def test_bad_answers_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], answers: dict,
                                         message: str) -> None:
    (tmp_path / "a.json").write_text(json.dumps(answers))
    code = main(["memoryarena", "grade", "--env", "formal_reasoning_math", "--tasks",
                 str(EXAMPLES / "formal_reasoning_math.synthetic.jsonl"), "--answers", str(tmp_path / "a.json"),
                 "--out", str(tmp_path / "o.json")])
    assert code == 2 and re.search(message, capsys.readouterr().err)


def test_subtasks_command(tmp_path: Path) -> None:
    out_path = tmp_path / "subtasks.json"
    assert main(["memoryarena", "subtasks", "--env", "group_travel_planner", "--tasks",
                 str(EXAMPLES / "group_travel_planner.synthetic.jsonl"), "--out", str(out_path)]) == 0
    out = json.loads(out_path.read_text())
    first = out["tasks"][0]
    assert set(first) == {"id", "subtasks", "base_plan_text", "base_memory_entry"}
    assert first["subtasks"][0]["name"] == "Eric" and first["subtasks"][0]["prompt"].startswith("Create a travel plan for Eric.")
    assert main(["memoryarena", "subtasks", "--env", "formal_reasoning_phys", "--tasks",
                 str(EXAMPLES / "formal_reasoning_phys.synthetic.jsonl"), "--out", str(out_path)]) == 0
    formal = json.loads(out_path.read_text())["tasks"][0]
    assert set(formal) == {"id", "subtasks"} and set(formal["subtasks"][0]) == {"index", "prompt"}


def test_travel_tool_command(tmp_path: Path) -> None:
    calls = [{"name": "CitySearch", "arguments": {"state": "Nowhere"}},
             {"name": "DistanceMatrix", "arguments": {"origin": "Las Vegas", "destination": "Stockton"}},
             {"name": "Nope", "arguments": {}}]
    (tmp_path / "calls.json").write_text(json.dumps(calls))
    assert main(["memoryarena", "travel-tool", "--db", str(TRAVEL_DB), "--calls", str(tmp_path / "calls.json"),
                 "--out", str(tmp_path / "out.json")]) == 0
    assert json.loads((tmp_path / "out.json").read_text()) == [
        "Invalid State", "origin: Las Vegas\ndestination: Stockton\ncost: 41\nduration: 7 hours 46 mins\ndistance: 835 km",
        "Error: Unknown tool 'Nope'"]
    assert main(["memoryarena", "travel-tool", "--db", str(tmp_path), "--calls", str(tmp_path / "calls.json"),
                 "--out", str(tmp_path / "out.json")]) == 2
