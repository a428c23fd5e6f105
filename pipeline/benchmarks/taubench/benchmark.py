"""τ-bench as a pipeline plug-in: its cells, tasks, episodes, grading, metrics, oracle and commands."""

from __future__ import annotations

import json
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from flowstate import EpisodeShape, MethodOptions, MethodPlugin, Policy, TaskPrompt
from pipeline.benchmarks.base import (
    Benchmark,
    BenchmarkOptionError,
    EpisodeRecord,
    ExpectedEpisode,
    Grade,
    GradingError,
    RoleCallers,
    UnknownTaskError,
    register_benchmark,
)
from pipeline.benchmarks.taubench import conformance, domains, grading
from pipeline.benchmarks.taubench.data import SHA256, verified_path
from pipeline.benchmarks.taubench.episode import TauEpisode
from pipeline.benchmarks.taubench.scripted_user import ScriptedUser
from pipeline.benchmarks.taubench.user_simulator import LLMUserSimulator
from pipeline.core.catalog import MetricSpec
from pipeline.core.specs import BenchmarkCell

if TYPE_CHECKING:
    from pipeline.core.cli_hooks import CliHooks

# The role sentence upstream's agent instruction opens with, in the task-policy slot (the
# protocol and ReAct rules already say how to answer, so upstream's format lines are not repeated).
TAU_ROLE = "You are a customer service agent that helps the user according to the policy below."
JUDGE_ATTEMPTS = 3
# Dry-run heuristic: the agent calls once per gold action plus a few steps for talking and state
# bookkeeping; the user simulator speaks about this often. Each step sees a tool's result or the
# user's reply of about this many tokens.
EXTRA_AGENT_CALLS = 4
USER_CALLS = 4
OBSERVATION_TOKENS = 300


class TauBenchCell(BenchmarkCell):
    """One τ-bench domain and the tasks to run from it."""

    benchmark: Literal["taubench"] = "taubench"
    domain: Literal["airline", "retail"]
    # Explicit task ids; otherwise the split (upstream's "base" = all 50 / 114 tasks), then limit.
    tasks: list[str] | None = None
    split: Literal["base", "train", "test"] = "base"
    limit: int | None = Field(default=None, gt=0)
    # "task": each task's reward_basis (retail NL assertions need a judge);
    # "classic": DB × COMMUNICATE for both domains, no judge (labelled as such in results).
    reward_basis: Literal["task", "classic"] = "task"
    # "compact": one line per tool for small-context CPU models (labelled in results).
    tool_rendering: Literal["full", "compact"] = "full"
    # Upstream's episode limits: max_env_steps counts steps as upstream does (one per user message, agent
    # message and batch of tool results; termination `max_steps`), max_errors failed tool results
    # (termination `too_many_errors`).
    max_env_steps: int = Field(default=200, gt=0)
    max_errors: int = Field(default=10, gt=0)


@cache
def task_prompt(domain: str, tool_rendering: str) -> TaskPrompt:
    """The benchmark's part of every method's system prompt: role + policy, and the tool list
    (built once per process: the data behind it is verified and immutable)."""
    if tool_rendering == "compact":
        tools = conformance.compact_tool_list(domain)
    else:
        tools = "\n".join(json.dumps(schema, ensure_ascii=False) for schema in conformance.tool_list(domain))
    return TaskPrompt(task_policy=f"{TAU_ROLE}\n\n{domains.policy(domain)}", available_tools=tools)


def to_grade(info: grading.RewardInfo) -> Grade:
    """τ-bench's RewardInfo in the pipeline's generic form."""
    components = info.components
    values = {"db": components.get("DB"), "communicate": components.get("COMMUNICATE"),
              "nl_assertion": components.get("NL_ASSERTION"), "action": components.get("ACTION"),
              "action_read": info.read_accuracy, "action_write": info.write_accuracy}
    return Grade(reward=info.reward, success=grading.is_success(info.reward), graded=info.graded,
                 basis=f"{info.basis}: {'×'.join(info.reward_basis)}",
                 metrics={k: v for k, v in values.items() if v is not None}, detail_json=info.model_dump_json())


class TauBench(Benchmark[TauBenchCell]):
    name = "taubench"
    cell = TauBenchCell
    scripted_roles = frozenset({"user_simulator"})
    report_heading = "Table 2: results per domain"
    report_caption = (
        "PR = pass rate (mean reward), DB = database accuracy, Act. = share of episodes matching every gold "
        "action, all in percent over scored episodes (infrastructure failures excluded); #Tok = the agent's "
        "prompt + completion tokens over finished episodes. Δ rows compare with the baseline on the same "
        "model and tasks: percentage points for PR/DB/Act., relative change of #Tok per episode.")
    metrics = (
        MetricSpec(name="pass_rate", label="PR", column="reward", headline=True,
                   description="mean reward (τ-bench avg_reward; the paper's PR)"),
        MetricSpec(name="success_rate", label="Success", column="success",
                   description="share of episodes with |reward − 1| ≤ 1e-6"),
        MetricSpec(name="db", label="DB", aggregate="gated_mean", headline=True,
                   description="share of episodes whose final database matches the gold one"),
        MetricSpec(name="communicate", label="COMMUNICATE", aggregate="gated_mean",
                   description="share of episodes that communicated every required string"),
        MetricSpec(name="nl_assertion", label="NL", aggregate="gated_mean",
                   description="share of episodes whose NL assertions the judge accepted"),
        MetricSpec(name="action", label="Act.", aggregate="gated_mean", headline=True,
                   description="share of episodes where every gold action was matched"),
        MetricSpec(name="action_read", label="Act. read", aggregate="gated_mean",
                   description="mean read-action accuracy (fraction of gold read actions matched)"),
        MetricSpec(name="action_write", label="Act. write", aggregate="gated_mean",
                   description="mean write-action accuracy (fraction of gold write actions matched)"),
    )

    def task_ids(self, cell: TauBenchCell) -> list[str]:
        known = [t.id for t in domains.load_tasks(cell.domain)]
        if cell.tasks is not None:
            missing = [t for t in cell.tasks if t not in set(known)]
            if missing:
                raise UnknownTaskError(f"taubench {cell.domain} has no tasks {missing} (ids run {known[0]}..{known[-1]})")
            ids = list(cell.tasks)
        else:
            ids = domains.task_split(cell.domain, cell.split)
        return ids[: cell.limit] if cell.limit else ids

    def data_checksums(self, cell: TauBenchCell) -> dict[str, str]:
        files = sorted(f for f in SHA256 if f.startswith(f"{cell.domain}/")) + ["user_simulator/simulation_guidelines.md"]
        checksums = {}
        for relative in files:
            verified_path(relative)
            checksums[f"{self.name}/{relative}"] = SHA256[relative]
        return checksums

    def check_roles(self, cell: TauBenchCell, roles: dict[str, Any]) -> None:
        if roles.get("user_simulator", "none") == "none":
            raise BenchmarkOptionError("taubench needs a user_simulator: a model, or `scripted` (the test fixture)")
        if cell.reward_basis == "task" and cell.domain == "retail" and roles.get("judge", "none") == "none":
            raise BenchmarkOptionError("retail graded on its task basis uses NL assertions: name a judge, or set "
                                       "reward_basis: classic")

    def preload(self, cell: TauBenchCell) -> None:
        domains.initial_db(cell.domain)
        domains.load_tasks(cell.domain)
        domains.tool_schemas(cell.domain)
        domains.policy(cell.domain)
        domains.simulation_guidelines()

    def episode_roles(self, cell: TauBenchCell) -> frozenset[str]:
        return frozenset({"user_simulator", "judge"})

    def task_prompt(self, cell: TauBenchCell, task_id: str) -> TaskPrompt:
        return task_prompt(cell.domain, cell.tool_rendering)

    def tool_names(self, cell: TauBenchCell, task_id: str) -> list[str]:
        return list(domains.tool_schemas(cell.domain).kinds)

    async def environment(self, cell: TauBenchCell, task_id: str, callers: RoleCallers) -> TauEpisode:
        task = domains.get_task(cell.domain, task_id)
        user = (ScriptedUser(task) if "user_simulator" in callers.scripted
                else LLMUserSimulator(_required(callers.user_simulator, "user_simulator"), task))
        return TauEpisode(task, user, max_steps=cell.max_env_steps, max_errors=cell.max_errors)

    async def grade(self, cell: TauBenchCell, task_id: str, record: EpisodeRecord,
                    judge: Policy | None, *, basis: str | None = None) -> Grade:
        """Grade (TOOLS.md §7); a judge reply that is not the expected JSON is asked again, then an error."""
        chosen = _basis(basis) or cell.reward_basis
        task = domains.get_task(cell.domain, task_id)
        error = None
        for _ in range(JUDGE_ATTEMPTS):
            try:
                info = await grading.grade(task, record.transcript, record.termination, judge=judge, basis=chosen)
                return to_grade(info)
            except grading.JudgeOutputError as exc:
                error = f"judge output unusable after {JUDGE_ATTEMPTS} attempts: {exc}"
        raise GradingError(error)

    def expected_episode(self, cell: TauBenchCell, task_id: str) -> ExpectedEpisode:
        """One conversation: a step per gold action, each with its observation, and a few more."""
        actions = len(domains.get_task(cell.domain, task_id).evaluation_criteria.actions)
        shape = EpisodeShape(requests=1, steps=actions + EXTRA_AGENT_CALLS, observations=actions + USER_CALLS,
                             memory_entries=0, entry_tokens=OBSERVATION_TOKENS)
        return ExpectedEpisode(shape, other_calls=USER_CALLS)

    def oracle(self, cell: TauBenchCell, task_id: str, method: MethodPlugin, options: MethodOptions) -> Policy:
        from pipeline.benchmarks.taubench.oracle import OraclePolicy

        return OraclePolicy(domains.get_task(cell.domain, task_id), method.uses(options), options.protocol)

    def add_commands(self, cli: CliHooks) -> None:
        from pipeline.benchmarks.taubench.cli import add_commands

        add_commands(cli)


def _basis(basis: str | None) -> grading.Basis | None:
    """A grading basis asked for by name (``flowstate grade --basis``), or None for the cell's own."""
    match basis:
        case None | "task" | "classic":
            return basis
    raise BenchmarkOptionError(f"taubench grades on basis 'task' or 'classic', not {basis!r}")


def _required(policy: Policy | None, role: str) -> Policy:
    if policy is None:
        raise ValueError(f"taubench episodes need a {role} model")
    return policy


TAUBENCH = register_benchmark(TauBench())
