"""What ``flowstate memoryarena grade`` and ``subtasks`` read and write, in exactly the formats of
CONTRACT §8–9: ``grade`` is deterministic (no network, no model: outputs and judge replies are
inputs); ``travel-tool``'s format is the travel tools' own (:mod:`~pipeline.benchmarks.memoryarena.travel_tools`)."""

from __future__ import annotations

from typing import Any

from flowstate import FlowStateError
from pipeline.benchmarks.memoryarena import scoring
from pipeline.benchmarks.memoryarena.data import Config, FormalTask, ShoppingTask, Task, TravelTask
from pipeline.benchmarks.memoryarena.subtasks import (
    base_memory_entry,
    base_plan_text,
    formal_prompts,
    shopping_prompts,
    travel_prompts,
)


class AnswersError(FlowStateError, ValueError):
    """ANSWERS.json that does not follow §8.2 (the message names the task and subtask)."""


def _entry(env: Config, task_id: int, k: int, value: Any) -> Any:
    """One subtask's answer checked against §8.2 (None: the agent produced nothing)."""
    if value is None:
        return None
    where = f"tasks[{task_id}].subtasks[{k - 1}]"
    if not isinstance(value, dict):
        raise AnswersError(f"{where}: expected an object or null, got {type(value).__name__}")
    if env.startswith("formal_reasoning"):
        if not isinstance(value.get("response"), str) or not isinstance(value.get("judge_output"), str):
            raise AnswersError(f"{where}: a formal-reasoning answer needs the strings response and judge_output")
        return value["response"], value["judge_output"]
    if env == "group_travel_planner":
        if not isinstance(value.get("response"), str):
            raise AnswersError(f"{where}: a travel answer needs the string response")
        return value["response"]
    if "purchased_asin" not in value or not (value["purchased_asin"] is None or isinstance(value["purchased_asin"], str)):
        raise AnswersError(f"{where}: a shopping answer needs purchased_asin (a string or null)")
    return value


def grade_answers(env: Config, tasks: list[Task], answers: dict[str, Any]) -> dict[str, Any]:
    """OUT.json (§8.3) for TASKS (in their order) and ANSWERS.json."""
    if not isinstance(answers, dict) or not isinstance(answers.get("tasks", {}), dict):
        raise AnswersError('ANSWERS.json is {"env": ENV, "tasks": {"<id>": {"subtasks": [...]}}, ...}')
    if answers.get("env") not in (None, env):
        raise AnswersError(f"ANSWERS.json is for env {answers.get('env')!r}, not {env!r}")
    given: dict[str, Any] = answers.get("tasks") or {}
    results: list[Any] = []
    for task in tasks:
        raw = (given.get(str(task.id)) or {}).get("subtasks") or []
        if not isinstance(raw, list):
            raise AnswersError(f"tasks[{task.id}].subtasks: expected a list")
        entries = [_entry(env, task.id, k, v) for k, v in enumerate(raw, 1)]
        if isinstance(task, FormalTask):
            results.append(scoring.grade_formal(task, entries))
        elif isinstance(task, TravelTask):
            results.append(scoring.grade_travel(task, entries))
        else:
            results.append(scoring.grade_shopping(task, entries, answers.get("catalog") or {}))
    if env == "group_travel_planner":
        aggregate = scoring.travel_aggregate(results)
        task_json = [{**r.model_dump(exclude={"subtasks"}), "subtasks": [s.as_json() for s in r.subtasks]} for r in results]
    else:
        aggregate = (scoring.shopping_aggregate(results) if env == "bundled_shopping"
                     else scoring.formal_aggregate(results))
        task_json = [r.model_dump() for r in results]
    return {"env": env, "tasks": task_json, "aggregate": aggregate}


def subtask_texts(env: Config, tasks: list[Task]) -> dict[str, Any]:
    """OUT.json of §9.1: each task's subtask texts (travel: with names, the base plan and memory entry)."""
    out = []
    for task in tasks:
        if isinstance(task, TravelTask):
            out.append({"id": task.id, "subtasks": [{"index": k, "prompt": prompt, "name": name}
                                                    for k, (name, prompt) in enumerate(travel_prompts(task), 1)],
                        "base_plan_text": base_plan_text(task), "base_memory_entry": base_memory_entry(task)})
        else:
            prompts = formal_prompts(task) if isinstance(task, FormalTask) else shopping_prompts(task)
            out.append({"id": task.id, "subtasks": [{"index": k, "prompt": p} for k, p in enumerate(prompts, 1)]})
    return {"env": env, "tasks": out}


__all__ = ["AnswersError", "ShoppingTask", "grade_answers", "subtask_texts"]
