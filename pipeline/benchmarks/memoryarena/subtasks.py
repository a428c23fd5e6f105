"""How a MemoryArena task becomes subtasks, with the exact texts (CONTRACT §3.1, §4.1–4.2, §5.1), and
what each environment writes to memory (§3.5, §4.1–4.2, §5.4).

Templates come from prompts.json; only their listed markers are substituted, in one pass, so text
inserted for one marker is never substituted again.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pipeline.benchmarks.memoryarena.data import FormalTask, ShoppingTask, TravelTask, prompts

PLAN_KEYS = ("current_city", "transportation", "breakfast", "attraction", "lunch", "dinner", "accommodation")
_PLAN_LABELS = ("Current City", "Transportation", "Breakfast", "Attraction", "Lunch", "Dinner", "Accommodation")
_NAME = re.compile(r"I am (\w+)\.")


def fill(template: str, values: dict[str, str]) -> str:
    """Replace each ``{marker}`` of ``values`` in ``template`` in one pass (other braces are literal)."""
    pattern = re.compile("|".join(re.escape("{" + k + "}") for k in values))
    return pattern.sub(lambda m: values[m.group(0)[1:-1]], template)


# -- formal reasoning (§3.1) ----------------------------------------------------------------------
def formal_prompt(question: str, background: str) -> str:
    """q_k: the task template with the background (or its placeholder), or the question alone when it
    already carries ``### BACKGROUND`` / ``### PROBLEM``."""
    if "### BACKGROUND" in question or "### PROBLEM" in question:
        return question
    p = prompts()["formal_reasoning"]
    return fill(p["task_prompt_template"], {"background": background or p["background_placeholder"], "task": question})


def formal_prompts(task: FormalTask) -> list[str]:
    return [formal_prompt(q, b) for q, b in zip(task.questions, task.backgrounds, strict=True)]


def formal_memory_entry(question: str, answer: str, tool_trace: list[dict[str, Any]]) -> str:
    """What formal reasoning stores after a subtask (§3.5); ``tool_trace`` as upstream's list of dicts."""
    entry = f"## Task: {question}\n## solution: {answer}\n"
    if tool_trace:
        entry += f"## Tool Calls Info: {python_repr(tool_trace)}\n"
    return entry


FORMAL_FIRST_MEMORY = "Initial result: Empty\n"


# -- group travel (§4.1-4.2) ------------------------------------------------------------------------
def traveller_name(question: str) -> str:
    match = _NAME.match(question)
    return match.group(1) if match else "Person"


def travel_user_message(name: str, question: str) -> str:
    return fill(prompts()["group_travel_planner"]["user_prompt_template"], {"name": name, "query": question})


def travel_prompts(task: TravelTask) -> list[tuple[str, str]]:
    """(traveller name, user message) per subtask: subtask k is added traveller k."""
    return [(traveller_name(q), travel_user_message(traveller_name(q), q)) for q in task.questions]


def plan_text(name: str, days: list[dict[str, Any]]) -> str:
    """A plan as upstream writes the base person's: a header, then per day its seven lines and a blank
    line, joined with newlines (so it ends with one, the last day's blank line)."""
    lines = [f"=== {name}'s Plan ==="]
    for day in days:
        lines.append(f"Day {day.get('days') or day.get('day')}:")
        lines += [f"{label}: {day.get(key, '-')}" for label, key in zip(_PLAN_LABELS, PLAN_KEYS, strict=True)]
        lines.append("")
    return "\n".join(lines)


def base_plan_text(task: TravelTask) -> str:
    return plan_text(task.base_person.name, task.base_person.daily_plans)


def base_memory_entry(task: TravelTask) -> str:
    """The base person, stored before the first traveller (§4.1)."""
    base = task.base_person
    return json.dumps({"name": base.name, "query": base.query, "is_base_person": True,
                       "final_plan": base_plan_text(task)}, ensure_ascii=False)


def traveller_memory_entry(name: str, question: str, scratchpad: list[dict[str, Any]], final_plan: str) -> str:
    """One traveller, stored after its subtask (§4.2)."""
    return json.dumps({"name": name, "query": question, "scratchpad": scratchpad, "final_plan": final_plan},
                      ensure_ascii=False)


# -- bundled shopping (§5.1) --------------------------------------------------------------------------
_PRODUCT_1 = re.compile(r"Product\s+1:", re.IGNORECASE)
_HEADER = re.compile(r"(Product\s+(\d+):)", re.IGNORECASE)
_JOIN = "\n\n" + "-" * 64 + "\n"


def shopping_prompts(task: ShoppingTask) -> list[str]:
    """I_k, what the agent is told to buy at step k (k = 1..6)."""
    first = task.questions[0]
    found = _PRODUCT_1.search(first)
    prefix = first[: found.start()].rstrip() if found else ""
    sections = []
    for k, question in enumerate(task.questions, 1):
        match = re.search(rf"Product\s+{k}:", question, re.IGNORECASE)
        sections.append(question[match.start():].strip() if match else f"Product {k}:\n")
    combined = (prefix + "\n" + _JOIN.join(sections)).strip() + "\n"
    matches = list(_HEADER.finditer(combined))
    head = combined[: matches[0].start()].strip() if matches else ""
    p = prompts()["bundled_shopping"]
    out = []
    for j, match in enumerate(matches[: len(task.questions)]):  # I_k uses the k-th header of A
        end = matches[j + 1].start() if j + 1 < len(matches) else len(combined)
        body = combined[match.end():end].strip()
        text = ((head + "\n\n") if head else "") + p["current_step_header"] + "\n" + p["current_step_reminder"] + "\n\n"
        text += (match.group(1) + "\n" + body).strip()
        out.append(text.strip() + "\n")
    return out


def shopping_memory_entry(step: int, before: str, action: str, after: str, done: bool) -> str:
    """One turn of a shopping step episode (§5.4)."""
    return f"Step {step}:\nUser Instruction: {before}\nAgent Action: {action}\nEnv Observation: {after}\nDone: {done}"


# -- memory wrapping (§2) -----------------------------------------------------------------------------
def wrap_memory(memory: str | None, prompt: str) -> str:
    """Upstream's ``wrap_user_prompt``: the memory (or ``None``) in ``<memory_context>``, then the prompt."""
    return fill(prompts()["memory"]["wrap_template"], {"memory_or_None": str(memory), "prompt": prompt})


def python_repr(value: Any) -> str:
    """``str()`` of a JSON-like value as Python prints it (dicts and lists of str, numbers, bools, None)."""
    return repr(_to_python(value))


def _to_python(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _to_python(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_python(v) for v in value]
    return value
