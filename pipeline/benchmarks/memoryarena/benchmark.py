"""MemoryArena as a pipeline plug-in: formal reasoning (math, physics), group travel and bundled
shopping (WebShop's store over the product database) end to end, graded as upstream grades."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from flowstate import ChatMessage, Completion, EpisodeShape, MethodOptions, MethodPlugin, Policy, TaskPrompt
from pipeline.benchmarks.base import (
    Benchmark,
    BenchmarkEnvironment,
    BenchmarkOptionError,
    EpisodeRecord,
    ExpectedEpisode,
    Grade,
    JudgeRequiredError,
    RequestGrade,
    RoleCallers,
    UnknownTaskError,
    register_benchmark,
)
from pipeline.benchmarks.memoryarena import scoring
from pipeline.benchmarks.memoryarena.data import (
    Config,
    FormalTask,
    ShoppingTask,
    Source,
    Task,
    TravelTask,
    data_root,
    load_tasks,
    prompts,
    task_file,
    travel_tool_schemas,
)
from pipeline.benchmarks.memoryarena.environments import FormalEpisode, TravelEpisode
from pipeline.benchmarks.memoryarena.travel_tools import checksums as travel_checksums
from pipeline.benchmarks.memoryarena.travel_tools import travel_db
from pipeline.benchmarks.requests import final_responses
from pipeline.core.catalog import MetricSpec
from pipeline.core.data import sha256_file
from pipeline.core.specs import BenchmarkCell

if TYPE_CHECKING:
    from pipeline.core.cli_hooks import CliHooks

FORMAL = ("formal_reasoning_math", "formal_reasoning_phys")
DOMAIN_LABELS = {"bundled_shopping": "Shopping", "group_travel_planner": "Travel", "formal_reasoning_math": "Math",
                 "formal_reasoning_phys": "Physics"}
SHOPPING = "bundled_shopping"
# Environments whose prompt or memory texts changed since their cells' ids were first pinned, and how
# often: group travel's base plan lost a second trailing newline (CONTRACT §4.1).
TEXT_REVISIONS: dict[str, int] = {"group_travel_planner": 1}


@dataclass(frozen=True)
class SubtaskSize:
    """Dry-run heuristic for one subtask (a request) of a domain."""

    steps: float  # the agent's
    observations: float  # steps with a tool's result
    entries: float  # memory entries the subtask hands a method when it ends
    entry_tokens: float  # of one entry or observation
    other_calls: float = 0.0  # the judge's and the tool model's
    initial_entries: float = 1.0  # the task's initial memory


# Shopping stores one entry per action (the page before, the action, the page after); formal
# reasoning and travel one per subtask, after an initial one.
SUBTASK_SIZES = {
    SHOPPING: SubtaskSize(steps=6, observations=6, entries=6, entry_tokens=1000, initial_entries=0),
    "group_travel_planner": SubtaskSize(steps=12, observations=11, entries=1, entry_tokens=800),
    **{domain: SubtaskSize(steps=3, observations=2, entries=1, entry_tokens=150, other_calls=2) for domain in FORMAL},
}


class MemoryArenaCell(BenchmarkCell):
    """One MemoryArena environment (a config of the dataset) and the tasks to run from it."""

    benchmark: Literal["memoryarena"] = "memoryarena"
    domain: Config
    # "hf": the dataset's files under memoryarena/<config>/; "examples": the synthetic test records.
    source: Source = "hf"
    tasks: list[str] | None = None  # explicit task ids (the rows' ids, as strings), else every task
    limit: int | None = Field(default=None, gt=0)
    # Upstream's limits on environment actions per subtask (the loop's own limit counts model calls).
    max_tool_steps: int = Field(default=30, gt=0)  # group travel: tool-using steps per traveller
    max_tool_rounds: int = Field(default=3, gt=0)  # formal reasoning: rounds of reasoning-tool calls
    max_actions: int | None = Field(default=None, gt=0)  # shopping: actions per product step (None: upstream's 20)
    identity_when_set: ClassVar[frozenset[str]] = frozenset({"max_actions"})

    def identity(self) -> dict[str, Any]:
        """Its options, and the revision of its environment's texts where they changed after ids were
        first pinned: results made with the old texts are never resumed onto (other cells keep their ids)."""
        revision = TEXT_REVISIONS.get(self.domain)
        return super().identity() | ({"text_revision": revision} if revision is not None else {})


def shopping_db(cell: MemoryArenaCell) -> Path:
    """The product database a shopping cell's store serves: the examples' generated one, or the real one."""
    from pipeline.benchmarks.memoryarena.shopping.generate import example_db
    from pipeline.benchmarks.memoryarena.shopping.productdb import default_db_dir

    return example_db() if cell.source == "examples" else default_db_dir()


def _tasks(cell: MemoryArenaCell) -> list[Task]:
    return load_tasks(task_file(cell.domain, cell.source), cell.domain)


def _task(cell: MemoryArenaCell, task_id: str) -> Task:
    found = next((t for t in _tasks(cell) if str(t.id) == task_id), None)
    if found is None:
        raise UnknownTaskError(f"memoryarena {cell.domain} ({cell.source}) has no task {task_id!r}")
    return found


class ScriptedJudge:
    """TEST FIXTURE: the formal judge that says yes exactly when the answer equals the ground truth;
    as the shopping attribute judge, it says an attribute is there when the name contains it."""

    async def complete(self, messages: Any, *, json_schema: Any = None) -> Completion:
        if messages[0].content == prompts()["bundled_shopping"]["attribute_judge_system"]:
            return Completion(text=_attribute_verdicts(messages[-1].content), model="scripted-judge")
        text = messages[-1].content
        response = text.split("Expression 1: ", 1)[1].split("\n            Expression 2: ", 1)[0]
        truth = text.split("Expression 2: ", 1)[1].split("\n\n            Respond only", 1)[0]
        return Completion(text="yes" if response.strip() == truth.strip() else "no", model="scripted-judge")


def _attribute_verdicts(prompt: str) -> str:
    name = prompt.split("Product name:\n", 1)[1].split("\n\nAttributes:\n", 1)[0]
    lines = prompt.split("\n\nAttributes:\n", 1)[1].split("\n\nReturn JSON:", 1)[0].splitlines()
    attributes = [line[2:] for line in lines if line.startswith("- ")]
    verdicts = [{"attribute": a, "has_attribute": scoring.string_matches([a], name) == 1} for a in attributes]
    return json.dumps({"matches": verdicts})


class MemoryArena(Benchmark[MemoryArenaCell]):
    name = "memoryarena"
    cell = MemoryArenaCell
    scripted_roles = frozenset({"judge"})
    report_heading = "Table 1: results per environment"
    percent_decimals = 2  # Table 1 prints 21.11
    report_caption = (
        "SR = share of tasks solved (the last subtask correct in Math and Physics; every traveller's plan right "
        "in Travel), PS = progress (the mean share of correct subtasks per task; in Travel the share of all "
        "travellers), sPS = soft progress (constraint slots satisfied, Travel), all in percent; #Tok = prompt + "
        "completion tokens of the agent and the method's own model. Δ rows: percentage points against the "
        "baseline on the same model and tasks, relative change of #Tok per episode.")
    metrics = (
        MetricSpec(name="SR", label="SR", column="success", headline=True,
                   description="share of tasks solved (formal: last subtask correct; travel: every traveller passes)"),
        MetricSpec(name="PS", label="PS", aggregate="ratio", numerator="ps_numerator", denominator="ps_denominator",
                   headline=True, description="progress: mean per-task share of correct subtasks (travel: "
                                              "passing travellers over all travellers)"),
        MetricSpec(name="sPS", label="sPS", key="soft_progress", headline=True,
                   description="soft progress (travel): mean per task of the constraint slots satisfied, over tasks "
                               "with constraint slots"),
        MetricSpec(name="PS_task_mean", label="PS (task mean)", column="reward",
                   description="mean per-task share of correct subtasks (travel's other definition of PS)"),
        MetricSpec(name="env_reward", label="env reward", aggregate="ratio", numerator="env_passed",
                   denominator="ps_denominator", description="travel: share of travellers whose own output "
                                                             "passes upstream's live seven-slot check"),
        MetricSpec(name="avg_reward", label="soft reward", description="shopping: mean soft reward over the steps "
                                                                       "(upstream's average_reward)"),
    )

    def task_ids(self, cell: MemoryArenaCell) -> list[str]:
        known = [str(t.id) for t in _tasks(cell)]
        if cell.tasks is not None:
            missing = [t for t in cell.tasks if t not in set(known)]
            if missing:
                raise UnknownTaskError(f"memoryarena {cell.domain} ({cell.source}) has no tasks {missing}")
            ids = list(cell.tasks)
        else:
            ids = known
        return ids[: cell.limit] if cell.limit else ids

    def data_checksums(self, cell: MemoryArenaCell) -> dict[str, str]:
        path = task_file(cell.domain, cell.source)
        _tasks(cell)  # verifies the rows
        root = data_root()
        sums = {f"memoryarena/{path.relative_to(root)}": sha256_file(path),
                "memoryarena/prompts.json": sha256_file(root / "prompts.json")}
        if cell.domain == "group_travel_planner":
            sums["memoryarena/travel_tools.json"] = sha256_file(root / "travel_tools.json")
            sums.update(travel_checksums())
        if cell.domain == SHOPPING:
            from pipeline.benchmarks.memoryarena.shopping.productdb import ITEMS, iter_products
            from pipeline.benchmarks.memoryarena.shopping.store import db_checksums

            db = shopping_db(cell)
            folder = "example_product_db" if cell.source == "examples" else "product_db"
            sums.update({f"memoryarena/{folder}/{name}": s for name, s in db_checksums(db).items()})
            next(iter_products(db / ITEMS), None)  # a products file in another format fails here, not in the store
        return sums

    def check_roles(self, cell: MemoryArenaCell, roles: dict[str, Any]) -> None:
        if cell.domain in FORMAL and roles.get("judge", "none") == "none":
            raise BenchmarkOptionError(f"memoryarena {cell.domain} judges every answer: name a judge (a model, or `scripted`)")

    def preload(self, cell: MemoryArenaCell) -> None:
        _tasks(cell)
        prompts()
        if cell.domain == "group_travel_planner":
            travel_db()
        if cell.domain == SHOPPING:  # starts loading the node's store while the first episodes begin
            from pipeline.benchmarks.memoryarena.shopping.store import store_for

            store_for(shopping_db(cell))

    def episode_roles(self, cell: MemoryArenaCell) -> frozenset[str]:
        if cell.domain == SHOPPING:  # the attribute judge (LLM mode) where the job names one
            return frozenset({"judge"})
        return frozenset({"judge", "tool_model"}) if cell.domain in FORMAL else frozenset()

    def task_prompt(self, cell: MemoryArenaCell, task_id: str) -> TaskPrompt:
        if cell.domain in FORMAL:
            p = prompts()["formal_reasoning"]
            return TaskPrompt(task_policy=p["agent_system_prompt"], available_tools=json.dumps(p["reasoning_tool_schema"]))
        if cell.domain == SHOPPING:
            from pipeline.benchmarks.memoryarena.shopping.episode import task_policy, tools_text

            return TaskPrompt(task_policy=task_policy(), available_tools=tools_text())
        tools = "\n".join(json.dumps(t, ensure_ascii=False) for t in travel_tool_schemas()["tools"])
        return TaskPrompt(task_policy=prompts()["group_travel_planner"]["system_prompt"], available_tools=tools)

    def tool_names(self, cell: MemoryArenaCell, task_id: str) -> list[str]:
        if cell.domain in FORMAL:
            return ["reasoning"]
        if cell.domain == SHOPPING:
            return ["search", "click"]
        return [t["function"]["name"] for t in travel_tool_schemas()["tools"]]

    async def environment(self, cell: MemoryArenaCell, task_id: str,
                          callers: RoleCallers) -> BenchmarkEnvironment:
        task = _task(cell, task_id)
        if isinstance(task, FormalTask):
            return FormalEpisode(task, callers.tool_model, max_tool_rounds=cell.max_tool_rounds)
        if isinstance(task, ShoppingTask):
            from pipeline.benchmarks.memoryarena.shopping.episode import MAX_ACTIONS, ShoppingEpisode
            from pipeline.benchmarks.memoryarena.shopping.store import store_for

            return ShoppingEpisode(task, store_for(shopping_db(cell)), max_actions=cell.max_actions or MAX_ACTIONS)
        assert isinstance(task, TravelTask)
        return TravelEpisode(task, travel_db(), max_tool_steps=cell.max_tool_steps)

    def scripted_judge(self, cell: MemoryArenaCell, task_id: str) -> Policy:
        return ScriptedJudge()

    async def grade(self, cell: MemoryArenaCell, task_id: str, record: EpisodeRecord,
                    judge: Policy | None, *, basis: str | None = None) -> Grade:
        if basis is not None:
            raise BenchmarkOptionError("memoryarena grades on one basis only (upstream's); --basis does not apply")
        task = _task(cell, task_id)
        answers = final_responses(record.transcript, len(task.questions))
        if isinstance(task, FormalTask):
            return await _grade_formal(task, answers, judge)
        if isinstance(task, ShoppingTask):
            return await _grade_shopping(task, record, shopping_db(cell), judge)
        assert isinstance(task, TravelTask)
        return _grade_travel(task, answers)

    def expected_episode(self, cell: MemoryArenaCell, task_id: str) -> ExpectedEpisode:
        n = len(_task(cell, task_id).questions)
        size = SUBTASK_SIZES[cell.domain]
        shape = EpisodeShape(requests=n, steps=size.steps * n, observations=size.observations * n,
                             memory_entries=size.initial_entries + size.entries * n, entry_tokens=size.entry_tokens)
        return ExpectedEpisode(shape, other_calls=size.other_calls * n)

    def domain_label(self, domain: str) -> str:
        return DOMAIN_LABELS.get(domain, domain)

    def depth_panel(self, domain: str) -> str:
        """Formal reasoning's depth curve pools math and physics (one panel in the paper's Figure 4)."""
        return "formal_reasoning" if domain in FORMAL else domain

    def oracle(self, cell: MemoryArenaCell, task_id: str, method: MethodPlugin, options: MethodOptions) -> Policy:
        from pipeline.benchmarks.memoryarena.oracle import MemoryArenaOracle

        task = _task(cell, task_id)
        names: dict[str, str] = {}
        if isinstance(task, ShoppingTask):
            from pipeline.benchmarks.memoryarena.shopping.store import product_names

            found = product_names(shopping_db(cell), {a.target_asin for a in task.answers})
            names = {asin: n.db_name for asin, n in found.items() if n.db_name}
        return MemoryArenaOracle(task, method.uses(options), options.protocol, names)

    def add_commands(self, cli: CliHooks) -> None:
        from pipeline.benchmarks.memoryarena.cli import add_commands

        add_commands(cli)


async def _grade_formal(task: FormalTask, answers: list[str | None], judge: Policy | None) -> Grade:
    """Each answer judged (an empty one too, as upstream does)."""
    if judge is None:
        raise JudgeRequiredError("formal reasoning is graded by a judge model: none was given")
    judged = []
    for answer, truth in zip(answers, task.answers, strict=True):
        response = (answer or "").strip()
        messages = [ChatMessage(role=m["role"], content=m["content"]) for m in scoring.judge_messages(response, truth)]
        judged.append((response, (await judge.complete(messages)).text))
    result = scoring.grade_formal(task, judged)
    return Grade(reward=result.progress, success=result.solved, basis="memoryarena: judge yes/no per subtask",
                 metrics={"ps_numerator": result.progress, "ps_denominator": 1.0},
                 requests=[RequestGrade(request=s.index, correct=s.correct, score=float(s.correct))
                           for s in result.subtasks],
                 detail_json=result.model_dump_json())


async def _grade_shopping(task: ShoppingTask, record: EpisodeRecord, db: Path, judge: Policy | None) -> Grade:
    from pipeline.benchmarks.memoryarena.shopping.grading import grade_episode

    result = await grade_episode(task, record.transcript, db, judge)
    rewards = [s.reward for s in result.subtasks]
    mode = "attribute judge" if judge is not None else "string-matched attributes"
    return Grade(reward=result.progress, success=result.solved, basis=f"memoryarena: purchases, {mode}",
                 metrics={"ps_numerator": result.progress, "ps_denominator": 1.0,
                          "avg_reward": sum(rewards) / len(rewards)},
                 requests=[RequestGrade(request=s.index, correct=s.success, score=s.reward, reason=s.reason)
                           for s in result.subtasks],
                 detail_json=result.model_dump_json())


def _grade_travel(task: TravelTask, answers: list[str | None]) -> Grade:
    result = scoring.grade_travel(task, answers)
    passed = sum(s.passed for s in result.subtasks)
    metrics = {"ps_numerator": float(passed), "ps_denominator": float(len(result.subtasks)),
               "env_passed": float(sum(s.env_reward for s in result.subtasks))}
    if result.soft_progress is not None:
        metrics["soft_progress"] = result.soft_progress
    return Grade(reward=result.progress, success=result.solved, basis="memoryarena: six slots (eval.py)",
                 metrics=metrics,
                 requests=[RequestGrade(request=s.index, correct=s.passed,
                                        score=s.constraint_passed / s.constraint_slots if s.constraint_slots else None,
                                        credit_passed=s.constraint_passed, credit_total=s.constraint_slots,
                                        reason=s.name) for s in result.subtasks],
                 detail_json=json.dumps({**result.model_dump(exclude={"subtasks"}),
                                         "subtasks": [s.as_json() for s in result.subtasks]}))


MEMORYARENA = register_benchmark(MemoryArena())
