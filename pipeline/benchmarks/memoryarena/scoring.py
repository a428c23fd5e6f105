"""MemoryArena's graders, exactly as upstream scores (CONTRACT §3.3–3.4, §4.7, §5.5–5.6, §6).

Pure functions of the task records and the agent's outputs (and, where upstream asks a model, that
model's raw reply): the pipeline's grading stage and the ``flowstate memoryarena grade`` command
both call them. Rates are fractions in [0, 1]; where upstream and the FlowState paper define a
metric differently, the paper's choice is the metric and the other value is reported beside it.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from pipeline.benchmarks.memoryarena.data import FormalTask, ShoppingTask, TravelTask, prompts
from pipeline.benchmarks.memoryarena.subtasks import base_plan_text, fill, traveller_name

SLOTS = ("breakfast", "lunch", "dinner", "accommodation", "transportation", "attraction")  # eval.py's six
ENV_SLOTS = ("current_city", "transportation", "breakfast", "attraction", "lunch", "dinner", "accommodation")
PASS = 0.7
MAX_TOKENS_TEXT = "Max Token Length Exceeded."
_SECTION = re.compile(r"===\s*([^=]+?)'s Plan\s*===")
_DAY = re.compile(r"Day\s*(\d+):(.*?)(?=Day\s*\d+:|$)", re.DOTALL)
_TOKEN = re.compile(r"[a-z0-9]+")


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def acc_at_k(correct: Sequence[Sequence[bool]]) -> list[float]:
    """Acc_k for k = 1..max K: of the tasks with at least k subtasks, the share whose k-th is correct."""
    depth = max((len(c) for c in correct), default=0)
    out = []
    for k in range(depth):
        having = [c[k] for c in correct if len(c) > k]
        out.append(sum(having) / len(having))
    return out


# -- formal reasoning (§3.3-3.4) --------------------------------------------------------------------
def judge_prompt(response: str, ground_truth: str) -> str:
    """The judge's user message: the question is the literal ``None`` (the runner never passes it)."""
    p = prompts()["formal_reasoning"]
    return fill(p["judge_user_template"], {"question": p["judge_question_value"], "response": str(response),
                                           "ground_truth": str(ground_truth)})


def judge_messages(response: str, ground_truth: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": prompts()["formal_reasoning"]["judge_system"]},
            {"role": "user", "content": judge_prompt(response, ground_truth)}]


def judge_verdict(reply: str) -> bool:
    """Upstream's test: ``"yes"`` anywhere in the stripped, lower-cased reply (``eyes`` counts)."""
    return "yes" in reply.strip().lower()


class FormalSubtask(_Out):
    index: int
    correct: bool
    judge_prompt: str | None


class FormalResult(_Out):
    id: int
    solved: bool
    progress: float
    soft_progress: None = None
    subtasks: list[FormalSubtask]


def grade_formal(task: FormalTask, answers: Sequence[tuple[str, str] | None]) -> FormalResult:
    """``answers[k-1]``: (the agent's final answer, the judge's raw reply), or None (no answer: wrong, no judge)."""
    subtasks = []
    for k, truth in enumerate(task.answers, 1):
        given = answers[k - 1] if k - 1 < len(answers) else None
        if given is None:
            subtasks.append(FormalSubtask(index=k, correct=False, judge_prompt=None))
        else:
            response, reply = given
            subtasks.append(FormalSubtask(index=k, correct=judge_verdict(reply), judge_prompt=judge_prompt(response, truth)))
    correct = [s.correct for s in subtasks]
    return FormalResult(id=task.id, solved=correct[-1], progress=sum(correct) / len(correct), subtasks=subtasks)


def formal_aggregate(results: Sequence[FormalResult]) -> dict[str, Any]:
    correct = [[s.correct for s in r.subtasks] for r in results]
    depth = max((len(c) for c in correct), default=0)
    cumulative = []
    for k in range(1, depth + 1):
        passed = sum(sum(c[: min(k, len(c))]) for c in correct)
        total = sum(min(k, len(c)) for c in correct)
        cumulative.append(passed / total)
    return {"n_tasks": len(results), "n_subtasks": sum(len(c) for c in correct),
            "SR": _mean([r.solved for r in results]), "PS": _mean([r.progress for r in results]),
            "acc_at_k": acc_at_k(correct), "cumulative_acc_at_k": cumulative}


# -- group travel (§4.7) ------------------------------------------------------------------------------
def similarity(a: Any, b: Any) -> float:
    """Slot similarity: difflib's ratio over the first min(len) characters (a prefix matches)."""
    if not a or not b:
        return 0.0
    a, b = str(a).strip().lower(), str(b).strip().lower()
    if a == "-" and b == "-":
        return 1.0
    m = min(len(a), len(b))
    return difflib.SequenceMatcher(None, a[:m], b[:m]).ratio() if m > 0 else 0.0


def sections(text: str) -> dict[str, str]:
    """Every ``=== Name's Plan ===`` block of a text; a later block of the same name replaces an earlier one."""
    parts = _SECTION.split(text)
    found: dict[str, str] = {}
    for i in range(1, len(parts) - 1, 2):
        found[parts[i].strip()] = parts[i + 1].strip()
    return found


def parse_plan(section: str) -> list[dict[str, Any]] | None:
    """A plan section as day objects: ``{"day": d, <key>: <value>, ...}`` (None: no plan)."""
    if section in ("", MAX_TOKENS_TEXT):
        return None
    days = []
    for match in _DAY.finditer(section):
        day: dict[str, Any] = {"day": int(match.group(1))}
        for line in match.group(2).strip().split("\n"):
            if ":" in line:
                key, value = line.split(":", 1)
                day[key.strip().lower().replace(" ", "_")] = value.strip()
        days.append(day)
    return days or None


def _day_number(day: Mapping[str, Any]) -> Any:
    return day.get("days") or day.get("day")


def _find_day(plan: Sequence[Mapping[str, Any]] | None, number: Any) -> Mapping[str, Any] | None:
    return next((d for d in plan or () if d.get("day") == number or d.get("days") == number), None)


def _slots_pass(gt: Mapping[str, Any], day: Mapping[str, Any] | None, slots: Sequence[str]) -> bool:
    return day is not None and all(similarity(gt.get(s, "-"), day.get(s, "-")) >= PASS for s in slots)


def plan_passes(plan: Sequence[Mapping[str, Any]] | None, gt: Sequence[Mapping[str, Any]],
                slots: Sequence[str] = SLOTS) -> bool:
    """Every GT day is in the plan (first day with its number) and every slot is similar enough."""
    return plan is not None and bool(gt) and all(_slots_pass(g, _find_day(plan, _day_number(g)), slots) for g in gt)


def constraint_slots(base: Sequence[Mapping[str, Any]], gt: Sequence[Mapping[str, Any]]
                     ) -> list[tuple[Mapping[str, Any], str]]:
    """(GT day, slot) where the traveller's GT differs from the base plan's first day of that number
    (GT days without a base day have none)."""
    pairs = []
    for g in gt:
        base_day = next((b for b in base if _day_number(b) == _day_number(g)), None)
        if base_day is not None:
            pairs += [(g, s) for s in SLOTS if similarity(base_day.get(s, "-"), g.get(s, "-")) < PASS]
    return pairs


def env_reward(response: str, name: str, gt: Sequence[Mapping[str, Any]]) -> bool:
    """The live env reward (logged upstream, not in SR/PS/sPS): the traveller's own output alone, seven slots."""
    match = re.search(r"===\s*" + re.escape(name) + r"'s Plan\s*===(.*?)(?====|$)", response, re.DOTALL)
    plan = parse_plan(match.group(1).strip()) if match else None
    return bool(gt) and all(_slots_pass(g, _find_day(plan, _day_number(g)), ENV_SLOTS) for g in gt)


class TravelSubtask(_Out):
    index: int
    name: str
    # "pass" in the OUT format; a keyword here
    passed: bool
    env_reward: bool
    constraint_slots: int
    constraint_passed: int
    plan: list[dict[str, Any]] | None

    def as_json(self) -> dict[str, Any]:
        data = self.model_dump()
        data["pass"] = data.pop("passed")
        return {k: data[k] for k in ("index", "name", "pass", "env_reward", "constraint_slots", "constraint_passed",
                                     "plan")}


class TravelResult(_Out):
    id: int
    solved: bool
    progress: float
    soft_progress: float | None
    subtasks: list[TravelSubtask]


def grade_travel(task: TravelTask, responses: Sequence[str | None]) -> TravelResult:
    """``responses[k-1]``: traveller k's raw final output (None or missing: no output, ``""``)."""
    outputs = [(responses[k] if k < len(responses) else None) or "" for k in range(len(task.questions))]
    accumulated = base_plan_text(task)
    for output in outputs:
        accumulated += "\n\n" + output
    found = sections(accumulated)
    base = task.base_person.daily_plans
    subtasks, rates = [], []
    for k, (question, gt) in enumerate(zip(task.questions, task.answers, strict=True), 1):
        name = traveller_name(question)
        plan = parse_plan(found.get(name, ""))
        pairs = constraint_slots(base, gt)
        passed_pairs = sum(1 for g, slot in pairs if _slots_pass(g, _find_day(plan, _day_number(g)), [slot]))
        if pairs:
            rates.append(passed_pairs / len(pairs))
        subtasks.append(TravelSubtask(index=k, name=name, passed=plan_passes(plan, gt), env_reward=env_reward(
            outputs[k - 1], name, gt), constraint_slots=len(pairs), constraint_passed=passed_pairs, plan=plan))
    passes = [s.passed for s in subtasks]
    return TravelResult(id=task.id, solved=all(passes), progress=sum(passes) / len(passes),
                        soft_progress=_mean(rates) if rates else None, subtasks=subtasks)


def travel_aggregate(results: Sequence[TravelResult]) -> dict[str, Any]:
    passes = [[s.passed for s in r.subtasks] for r in results]
    soft = [r.soft_progress for r in results if r.soft_progress is not None]
    n = sum(len(p) for p in passes)
    return {"n_tasks": len(results), "n_subtasks": n, "SR": _mean([r.solved for r in results]),
            "PS": sum(sum(p) for p in passes) / n if n else 0.0, "PS_task_mean": _mean([r.progress for r in results]),
            "sPS": _mean(soft), "acc_at_k": acc_at_k(passes)}


# -- bundled shopping (§5.5-5.6) ---------------------------------------------------------------------
def normalize(text: Any) -> str:
    lowered = str(text).lower().replace("-", " ").replace("/", " ")
    return re.sub(r"\s+", " ", lowered).strip()


def tokens(text: Any) -> set[str]:
    return set(_TOKEN.findall(normalize(text)))


def category_segments(category: Any) -> set[str]:
    if not category:
        return set()
    return {s.strip().lower() for s in str(category).split("›") if s.strip()}


def string_matches(attributes: Sequence[str], purchased_name: str | None) -> int:
    """String mode: an attribute matches when its normalised text is in the normalised name."""
    name = normalize(purchased_name or "")
    return sum(1 for a in attributes if normalize(a) and normalize(a) in name)


def judge_reply_matches(reply: str, attributes: Sequence[str]) -> int | None:
    """LLM mode: how many attributes the judge's reply says the name has (None: the reply is unusable)."""
    text = reply.strip()
    if text.startswith("```"):
        text = re.sub(r"\n```$", "", re.sub(r"^```[a-zA-Z0-9_-]*\n", "", text)).strip()
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < 0:
        return None
    try:
        matches = json.loads(text[start:end + 1]).get("matches")
    except (json.JSONDecodeError, AttributeError):
        return None
    if not isinstance(matches, list):
        return None
    verdicts: dict[str, bool] = {}
    for entry in matches:
        if isinstance(entry, dict) and isinstance(entry.get("attribute"), str) and isinstance(entry.get("has_attribute"), bool):
            verdicts[normalize(entry["attribute"])] = entry["has_attribute"]
    return sum(1 for a in attributes if verdicts.get(normalize(a)) is True)


def attribute_judge_messages(purchased_name: str, attributes: Sequence[str]) -> list[dict[str, str]]:
    p = prompts()["bundled_shopping"]
    lines = "\n".join("- " + a for a in attributes)
    return [{"role": "system", "content": p["attribute_judge_system"]},
            {"role": "user", "content": fill(p["attribute_judge_user_template"],
                                             {"purchased_name": purchased_name, "attribute_lines": lines})}]


JUDGE_ATTEMPTS = 3


class ShoppingSubtask(_Out):
    index: int
    reward: float
    success: bool
    reason: str
    r_type: float
    num_attr_matches: int
    name_similarity: float
    category_similarity: float


class ShoppingResult(_Out):
    id: int
    solved: bool
    progress: float
    soft_progress: None = None
    subtasks: list[ShoppingSubtask]


Catalog = Mapping[str, Mapping[str, Any]]


def grade_step(index: int, purchased: Any, target: Any, attributes: Sequence[str], catalog: Catalog, *,
               purchased_name: str | None = None, target_name: str | None = None,
               judge: Callable[[str, Sequence[str]], str] | None = None) -> ShoppingSubtask:
    """One step (§5.5). ``judge(purchased_name, attributes)`` returns the attribute judge's raw reply
    (LLM mode, up to three attempts); without it, string mode."""
    entries = {str(k).upper(): v for k, v in catalog.items()}
    p = str(purchased).upper() if purchased else None
    t = str(target).upper() if target else None
    target_entry = (entries.get(t) or {}) if t else {}
    tname = target_name or target_entry.get("name")
    pname = purchased_name or ((entries.get(p) or {}).get("name") if p else None)
    if judge is None:
        matched = string_matches(attributes, pname)
    elif not attributes or not pname:
        matched = 0
    else:
        matched = 0
        for _ in range(JUDGE_ATTEMPTS):
            found = judge_reply_matches(judge(pname, attributes), attributes)
            if found is not None:
                matched = found
                break
    target_tokens = tokens(tname) if tname else set()
    name_sim = len(target_tokens & tokens(pname)) / len(target_tokens) if tname and pname and target_tokens else 0.0
    target_segments = category_segments(target_entry.get("product_category"))
    purchased_segments = category_segments((entries.get(p) or {}).get("product_category")) if p else set()
    cat_sim = len(target_segments & purchased_segments) / len(target_segments) if target_segments else 0.0
    r_type = 1.0
    if not (cat_sim >= 0.5 or name_sim > 0.2):
        r_type = 0.5
    if name_sim < 0.1:
        r_type = 0.1
    if name_sim == 0:
        r_type = 0.0
    reward = (matched / len(attributes) if attributes else 0.0) * r_type
    reason = "computed"
    if p is None:
        reward, reason = 0.0, "no_purchase"
    elif p == t:
        reward, reason = 1.0, "asin_match"
    return ShoppingSubtask(index=index, reward=reward, success=reward == 1.0, reason=reason, r_type=r_type,
                           num_attr_matches=matched, name_similarity=name_sim, category_similarity=cat_sim)


def grade_shopping(task: ShoppingTask, steps: Sequence[Mapping[str, Any] | None], catalog: Catalog,
                   judge: Callable[[str, Sequence[str]], str] | None = None) -> ShoppingResult:
    """``steps[k-1]``: what step k bought (``purchased_asin`` and optional names), or None (no purchase)."""
    subtasks = []
    for k, answer in enumerate(task.answers, 1):
        given = (steps[k - 1] if k - 1 < len(steps) else None) or {}
        step_judge = judge
        if judge is None and "judge_response" in given:
            reply = str(given["judge_response"])
            step_judge = lambda name, attrs, reply=reply: reply  # noqa: E731 - the recorded reply, every attempt
        subtasks.append(grade_step(k, given.get("purchased_asin"), answer.target_asin, answer.attributes, catalog,
                                   purchased_name=given.get("purchased_name"), target_name=given.get("target_name"),
                                   judge=step_judge))
    success = [s.success for s in subtasks]
    return ShoppingResult(id=task.id, solved=all(success), progress=sum(success) / len(success), subtasks=subtasks)


def shopping_aggregate(results: Sequence[ShoppingResult]) -> dict[str, Any]:
    success = [[s.success for s in r.subtasks] for r in results]
    rewards = [s.reward for r in results for s in r.subtasks]
    by_position = acc_at_k(success)
    return {"n_tasks": len(results), "n_subtasks": len(rewards), "SR": _mean([r.solved for r in results]),
            "PS": _mean([r.progress for r in results]), "acc_at_k": by_position, "avg_reward": _mean(rewards),
            "avg_success_rate_by_position": _mean(by_position)}
