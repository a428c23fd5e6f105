"""What a benchmark is to the pipeline: one class implementing :class:`Benchmark`, registered by name.

A benchmark lives in one folder (``pipeline/benchmarks/<name>/`` or a user's own package) and gives
the pipeline everything the generic machinery must not know: its job-file cell model, its task ids
and data checksums, preloading, the per-episode environment (which drives its own user or hands the
loop a fixed list of requests, and decides what ends a request and what memory methods store and
query with), the prompt parts, grading as its own stage, the metrics it reports and how they
aggregate, its test oracle and its command-line tools. Nothing outside its folder names it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, get_args

from pydantic import BaseModel, ConfigDict

from flowstate import Environment, EpisodeShape, FlowStateError, MethodOptions, MethodPlugin, Policy, TaskPrompt
from flowstate.registry import Registry
from pipeline.benchmarks.transcript import TranscriptMessage
from pipeline.core.catalog import CATALOGS, BenchmarkCatalog, MetricSpec
from pipeline.core.specs import BenchmarkCell

if TYPE_CHECKING:
    from pipeline.core.cli_hooks import CliHooks

# The benchmark's own cell model (a BenchmarkCell that narrows ``benchmark`` and ``domain``).
CellT = TypeVar("CellT", bound=BenchmarkCell)


@dataclass(frozen=True)
class ExpectedEpisode:
    """Rough size of one episode, for dry-run estimates: its shape (what the agent's calls and a
    method's own calls follow from) and the calls of the benchmark's roles (user simulator, judge,
    tool model)."""

    shape: EpisodeShape
    other_calls: float = 0.0


class RequestGrade(BaseModel):
    """The grade of one request (a subtask), for benchmarks that grade each one (depth analysis)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    request: int
    correct: bool
    score: float | None = None
    # Partial credit by named items (e.g. constraint slots): how many passed of how many.
    credit_passed: int | None = None
    credit_total: int | None = None
    reason: str | None = None


class Grade(BaseModel):
    """What grading decided about one episode."""

    model_config = ConfigDict(extra="forbid")

    reward: float
    success: bool
    # False when a gate (e.g. how the episode ended) made the benchmark evaluate nothing: reward 0.
    graded: bool = True
    # How the reward was computed, always explicit (e.g. "task: DB×NL_ASSERTION").
    basis: str
    metrics: dict[str, float] = {}
    requests: list[RequestGrade] = []
    # The benchmark's full grading record (JSON), kept for re-checking and exports.
    detail_json: str | None = None


class BenchmarkOptionError(FlowStateError, ValueError):
    """What a job or command asks of a benchmark that it cannot do: roles its cell cannot run with, a
    grading basis it does not grade on. A ``ValueError`` too, so that job validation (pydantic) reports
    it against the job's key."""


class UnknownTaskError(BenchmarkOptionError):
    """A task id the benchmark does not have (a cell's ``tasks``, a command's ``--task``)."""


class GradingError(Exception):
    """Grading could not decide (e.g. the judge kept answering garbage). Not a user error: an outcome
    that the run records (the episode is kept ungraded, with this message) and ``flowstate grade``
    can revisit; one that escapes is a bug, shown with its traceback."""


class JudgeRequiredError(GradingError):  # noqa: N818 - reads as the situation
    """The grade needs a judge model, and none was given (a job's roles are checked for it before
    the run; ``flowstate grade`` counts such episodes)."""


class EpisodeRecord(BaseModel):
    """What grading reads: the conversation as the benchmark saw it, and how the episode ended."""

    model_config = ConfigDict(extra="forbid")

    transcript: list[TranscriptMessage]
    termination: str


class BenchmarkEnvironment(Environment):
    """An environment that records its conversation in the transcript table's shape."""

    transcript: list[TranscriptMessage]


@dataclass(frozen=True)
class RoleCallers:
    """The models a benchmark's episode may call (each recorded), and the roles that a job gave the
    benchmark's own scripted test fixture (``user_simulator: scripted``)."""

    user_simulator: Policy | None = None
    judge: Policy | None = None
    tool_model: Policy | None = None
    scripted: frozenset[str] = field(default_factory=frozenset)


class Benchmark(ABC, Generic[CellT]):
    """The plug-in contract, generic in the benchmark's own cell model (``Benchmark[MyCell]``), so that
    every method takes that model. Subclasses set ``name`` and ``cell`` and implement the required
    core (tasks, data, prompt parts, environment, grading); the optional parts have defaults that
    suit a benchmark without a simulated user, a judge, fixtures or commands."""

    name: ClassVar[str]
    cell: type[CellT]
    metrics: ClassVar[tuple[MetricSpec, ...]] = ()
    # Roles each episode can use ("scripted" allowed where the benchmark has a fixture for it).
    scripted_roles: ClassVar[frozenset[str]] = frozenset()

    # -- required: tasks and data ----------------------------------------------------------------
    @abstractmethod
    def task_ids(self, cell: CellT) -> list[str]:
        """The cell's tasks in run order (explicit ids checked to exist: :class:`UnknownTaskError`)."""

    @abstractmethod
    def data_checksums(self, cell: CellT) -> dict[str, str]:
        """``<benchmark>/<file> -> sha256`` of every file an episode reads, after verifying them."""

    # -- required: one episode ---------------------------------------------------------------------
    @abstractmethod
    def task_prompt(self, cell: CellT, task_id: str) -> TaskPrompt:
        """The benchmark's part of every method's system prompt: the policy and the tool list."""

    @abstractmethod
    def tool_names(self, cell: CellT, task_id: str) -> list[str]:
        """The tools the agent may call (they constrain the JSON protocol's schema)."""

    @abstractmethod
    async def environment(self, cell: CellT, task_id: str, callers: RoleCallers) -> BenchmarkEnvironment:
        """A fresh environment for one episode of the task."""

    @abstractmethod
    async def grade(self, cell: CellT, task_id: str, record: EpisodeRecord, judge: Policy | None, *,
                    basis: str | None = None) -> Grade:
        """Grade one episode from its record (also re-grading stored episodes); ``basis`` overrides
        the cell's grading basis where the benchmark has several (another raises
        :class:`BenchmarkOptionError`). Raise :class:`GradingError` when grading cannot decide."""

    # -- optional: roles and loading ----------------------------------------------------------------
    def check_roles(self, cell: CellT, roles: dict[str, Any]) -> None:
        """Raise :class:`BenchmarkOptionError` when the job's roles (role -> setting; absent = not set)
        cannot run the cell."""

    def preload(self, cell: CellT) -> None:
        """Load and verify the cell's data now (data errors show at start-up, not mid-sweep)."""

    def episode_roles(self, cell: CellT) -> frozenset[str]:
        """The roles beside the agent that the cell's episodes call: user_simulator, judge, tool_model."""
        return frozenset()

    def expected_episode(self, cell: CellT, task_id: str) -> ExpectedEpisode:
        """Rough size of one episode, for dry-run estimates (by default one request of 8 steps, each
        but the last with an observation, and no memory entries)."""
        return ExpectedEpisode(EpisodeShape(requests=1, steps=8, observations=7, memory_entries=0, entry_tokens=500))

    # -- optional: the report's layout ------------------------------------------------------------
    # Heading and caption of the benchmark's main table in the report.
    report_heading: ClassVar[str] = "Results"
    report_caption: ClassVar[str] = ""
    # Decimals of the percentages in the paper's main table (the MLflow headline metrics' rounding).
    percent_decimals: ClassVar[int] = 1

    def domain_label(self, domain: str) -> str:
        """The domain's name in the report's column headers."""
        return domain.capitalize()

    def depth_panel(self, domain: str) -> str:
        """The panel of the accuracy-by-depth analysis a domain belongs to (domains may pool): itself."""
        return domain

    # -- optional: test fixtures and command-line tools ---------------------------------------------
    def scripted_judge(self, cell: CellT, task_id: str) -> Policy:
        """TEST FIXTURE: the judge a job gets with ``judge: scripted`` (for benchmarks with ``judge`` in
        ``scripted_roles``)."""
        raise NotImplementedError(f"benchmark {self.name!r} has no scripted judge")

    def oracle(self, cell: CellT, task_id: str, method: MethodPlugin, options: MethodOptions) -> Policy:
        """TEST FIXTURE: a scripted agent that solves the task in the protocol of ``method`` as
        configured by ``options``."""
        raise NotImplementedError(f"benchmark {self.name!r} has no oracle fixture")

    def add_commands(self, cli: CliHooks) -> None:
        """Register the benchmark's command-line tools (``flowstate <name> ...``, data fetching, exports)."""

    def metric(self, name: str) -> MetricSpec:
        return next(m for m in self.metrics if m.name == name)

    def headline(self) -> list[MetricSpec]:
        return [m for m in self.metrics if m.headline]


def benchmark_catalog(benchmark: Benchmark[Any]) -> BenchmarkCatalog:
    domains = get_args(benchmark.cell.model_fields["domain"].annotation)
    return BenchmarkCatalog(metrics=benchmark.metrics, report_heading=benchmark.report_heading,
                            report_caption=benchmark.report_caption,
                            percent_decimals=benchmark.percent_decimals,
                            domain_labels={d: benchmark.domain_label(d) for d in domains},
                            depth_panels={d: benchmark.depth_panel(d) for d in domains})


BENCHMARKS: Registry[Benchmark[Any]] = Registry("benchmark", "benchmark")
B = TypeVar("B", bound=Benchmark[Any])


def register_benchmark(benchmark: B) -> B:
    """Register a benchmark instance under its name (its cell model carries ``benchmark: Literal[name]``)."""
    BENCHMARKS.register(benchmark.name, benchmark, benchmark.cell)
    CATALOGS.register(benchmark.name, benchmark_catalog(benchmark))
    return benchmark


def benchmark_of(cell: BenchmarkCell) -> Benchmark[Any]:
    """The benchmark a cell belongs to (its cell type is the cell's own, unknown to generic callers)."""
    return BENCHMARKS.get(cell.benchmark)


def episode_prompt(cell: BenchmarkCell, task_id: str) -> TaskPrompt:
    """The task's prompt as a method sees it: with the cell's benchmark and domain (the state a
    method keeps may follow them)."""
    prompt = benchmark_of(cell).task_prompt(cell, task_id)
    return prompt.model_copy(update={"benchmark": cell.benchmark, "domain": cell.domain})
