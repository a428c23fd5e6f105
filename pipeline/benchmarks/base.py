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
from typing import TYPE_CHECKING, Any, ClassVar, get_args

from pydantic import BaseModel, ConfigDict

from flowstate import Environment, MethodPlugin, Policy, TaskPrompt
from flowstate.registry import Registry
from pipeline.benchmarks.transcript import TranscriptMessage
from pipeline.core.catalog import CATALOGS, BenchmarkCatalog, MetricSpec
from pipeline.core.specs import BenchmarkCell, EpisodeSpec

if TYPE_CHECKING:
    from pipeline.core.cli_hooks import CliHooks
    from pipeline.core.specs import EpisodeSpec


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


class GradingError(Exception):
    """Grading could not decide (e.g. the judge kept answering garbage); the episode is kept ungraded."""


class JudgeRequiredError(GradingError):  # noqa: N818 - reads as the situation
    """The grade needs a judge model, and none was given."""


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


class Benchmark(ABC):
    """The plug-in contract. Subclasses set the class attributes and implement the abstract methods;
    the others have defaults that suit a benchmark without a simulated user or a judge."""

    name: ClassVar[str]
    cell: ClassVar[type[BenchmarkCell]]
    metrics: ClassVar[tuple[MetricSpec, ...]] = ()
    # Heading and caption of the benchmark's main table in the report.
    report_heading: ClassVar[str] = "Results"
    report_caption: ClassVar[str] = ""
    # Roles each episode can use ("scripted" allowed where the benchmark has a fixture for it).
    scripted_roles: ClassVar[frozenset[str]] = frozenset()

    # -- the sweep: tasks, data, roles --------------------------------------------------------
    @abstractmethod
    def task_ids(self, cell: BenchmarkCell) -> list[str]:
        """The cell's tasks in run order (explicit ids checked to exist)."""

    @abstractmethod
    def data_checksums(self, cell: BenchmarkCell) -> dict[str, str]:
        """``<benchmark>/<file> -> sha256`` of every file an episode reads, after verifying them."""

    def check_roles(self, cell: BenchmarkCell, roles: dict[str, Any]) -> None:
        """Raise ``ValueError`` when the job's roles (role -> setting; absent = not set) cannot run the cell."""

    def preload(self, cell: BenchmarkCell) -> None:
        """Load and verify the cell's data now (data errors show at start-up, not mid-sweep)."""

    def episode_roles(self, cell: BenchmarkCell) -> frozenset[str]:
        """The roles beside the agent that the cell's episodes call: user_simulator, judge, tool_model."""
        return frozenset()

    # -- one episode ----------------------------------------------------------------------------
    @abstractmethod
    def task_prompt(self, cell: BenchmarkCell, task_id: str) -> TaskPrompt:
        """The benchmark's part of every method's system prompt: the policy and the tool list."""

    @abstractmethod
    def tool_names(self, cell: BenchmarkCell, task_id: str) -> list[str]:
        """The tools the agent may call (they constrain the JSON protocol's schema)."""

    @abstractmethod
    async def environment(self, cell: BenchmarkCell, task_id: str, callers: RoleCallers) -> BenchmarkEnvironment:
        """A fresh environment for one episode of the task."""

    @abstractmethod
    async def grade(self, cell: BenchmarkCell, task_id: str, record: EpisodeRecord, judge: Policy | None, *,
                    basis: str | None = None) -> Grade:
        """Grade one episode from its record (also re-grading stored episodes); ``basis`` overrides
        the cell's grading basis where the benchmark has several. Raise :class:`GradingError`."""

    def scripted_judge(self, cell: BenchmarkCell, task_id: str) -> Policy:
        """TEST FIXTURE: the judge a job gets with ``judge: scripted`` (for benchmarks with ``judge`` in
        ``scripted_roles``)."""
        raise NotImplementedError(f"benchmark {self.name!r} has no scripted judge")

    def domain_label(self, domain: str) -> str:
        """The domain's name in the report's column headers."""
        return domain.capitalize()

    def depth_panel(self, domain: str) -> str:
        """The panel of the accuracy-by-depth analysis a domain belongs to (domains may pool): itself."""
        return domain

    def expected_calls(self, cell: BenchmarkCell, task_id: str) -> tuple[float, float]:
        """Rough (agent calls, other model calls) of one episode, for dry-run estimates."""
        return 8.0, 0.0

    # -- fixtures and tools ------------------------------------------------------------------------
    def oracle(self, spec: EpisodeSpec, method: MethodPlugin) -> Policy:
        """TEST FIXTURE: a scripted agent that solves the episode's task in the method's protocol."""
        raise NotImplementedError(f"benchmark {self.name!r} has no oracle fixture")

    def add_commands(self, cli: CliHooks) -> None:
        """Register the benchmark's command-line tools (``flowstate <name> ...``, data fetching, exports)."""

    def metric(self, name: str) -> MetricSpec:
        return next(m for m in self.metrics if m.name == name)

    def headline(self) -> list[MetricSpec]:
        return [m for m in self.metrics if m.headline]


def benchmark_catalog(benchmark: Benchmark) -> BenchmarkCatalog:
    domains = get_args(benchmark.cell.model_fields["domain"].annotation)
    return BenchmarkCatalog(metrics=benchmark.metrics, report_heading=benchmark.report_heading,
                            report_caption=benchmark.report_caption,
                            domain_labels={d: benchmark.domain_label(d) for d in domains},
                            depth_panels={d: benchmark.depth_panel(d) for d in domains})


BENCHMARKS: Registry[Benchmark] = Registry("benchmark", "benchmark")


def register_benchmark(benchmark: Benchmark) -> Benchmark:
    """Register a benchmark instance under its name (its cell model carries ``benchmark: Literal[name]``)."""
    BENCHMARKS.register(benchmark.name, benchmark, benchmark.cell)
    CATALOGS.register(benchmark.name, benchmark_catalog(benchmark))
    return benchmark


def benchmark_of(cell: BenchmarkCell) -> Benchmark:
    return BENCHMARKS.get(cell.benchmark)
