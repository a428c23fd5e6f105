"""Job files (jobs/*.yaml) as strict pydantic models.

A job names the benchmark cells, the methods, the agent models, the user simulator and the judge
(each served by a named deployment), trials and seeds, limits, execution settings, where results
go and which MLflow experiment tracks them. Unknown keys and wrong types are errors that name the
file, line and key before anything starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from flowstate.loop import LoopLimits
from flowstate.methods import MethodName, MethodOptions
from flowstate.protocol import ProtocolMode
from pipeline.llm.deployments import DeploymentSpec
from pipeline.yaml_errors import ConfigError, load_yaml, validate

# Deployment names that need no entry under ``deployments`` (in-process test fixtures).
SCRIPTED = "scripted"
NONE = "none"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Sampling(Strict):
    """Generation parameters. Defaults are the paper's (appendix B.5)."""

    temperature: float = Field(default=0.1, ge=0)
    top_p: float = Field(default=1.0, gt=0, le=1)
    max_tokens: int = Field(default=32768, gt=0)
    enable_thinking: bool = False


class ModelUse(Strict):
    """A model serving one role: the deployment that serves it and how to sample."""

    deployment: str
    sampling: Sampling = Sampling()


class AgentModel(ModelUse):
    # Name of the model in results and MLflow; defaults to the deployment name.
    label: str | None = None

    @property
    def name(self) -> str:
        return self.label or self.deployment


class TauBenchCell(Strict):
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
    max_env_steps: int = Field(default=200, gt=0)
    max_errors: int = Field(default=10, gt=0)


# One benchmark so far; a second one joins as a union discriminated on ``benchmark``.
BenchmarkCell = TauBenchCell


class MethodSpec(Strict):
    name: MethodName
    protocol: ProtocolMode = ProtocolMode.TAGGED
    rejection_feedback: bool = False
    # Name in results; defaults to name plus any non-default option.
    label: str | None = None

    @property
    def options(self) -> MethodOptions:
        return MethodOptions(protocol=self.protocol, rejection_feedback=self.rejection_feedback)

    @property
    def display(self) -> str:
        if self.label:
            return self.label
        suffix = ("-json" if self.protocol is ProtocolMode.JSON else "") + ("-feedback" if self.rejection_feedback else "")
        return self.name.value + suffix


class Execution(Strict):
    """How the sweep runs; changing these never changes sweep or episode ids."""

    # Episodes in flight at once, over all actors.
    concurrency: int = Field(default=16, gt=0)
    # Episode actors; 0 = one per CPU Ray reports (at most one per 8 in-flight episodes).
    actors: int = Field(default=0, ge=0)
    # Attempts per episode after an infrastructure failure (actor died, endpoint down).
    episode_attempts: int = Field(default=3, gt=0)
    episode_timeout_s: float = Field(default=3600, gt=0)


class Tracking(Strict):
    experiment: str | None = None  # default: the job's name
    tracking_uri: str | None = None  # default: MLFLOW_TRACKING_URI or MLflow's own default
    trace_samples_per_cell: int = Field(default=3, ge=0)


class JobConfig(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    description: str = ""
    benchmarks: list[BenchmarkCell] = Field(min_length=1)
    methods: list[MethodSpec] = Field(min_length=1)
    agents: list[AgentModel] = Field(min_length=1)
    user_simulator: ModelUse | Literal["scripted"]
    judge: ModelUse | Literal["none"]
    deployments: dict[str, DeploymentSpec] = {}
    trials: int = Field(default=1, gt=0)
    # Upstream τ-bench seeds Python's RNG with 300 and draws one seed per trial.
    seed: int = 300
    limits: LoopLimits = LoopLimits()
    execution: Execution = Execution()
    output_dir: Path = Path("runs")
    tracking: Tracking = Tracking()

    @model_validator(mode="after")
    def _check_references(self) -> JobConfig:
        uses = [(f"agents[{i}]", a) for i, a in enumerate(self.agents)]
        if isinstance(self.user_simulator, ModelUse):
            uses.append(("user_simulator", self.user_simulator))
        if isinstance(self.judge, ModelUse):
            uses.append(("judge", self.judge))
        for where, use in uses:
            if use.deployment not in self.deployments:
                known = ", ".join(sorted(self.deployments)) or "none defined"
                raise ValueError(f"{where}.deployment {use.deployment!r} is not under 'deployments' (defined: {known})")
        labels = [m.display for m in self.methods]
        if len(set(labels)) != len(labels):
            raise ValueError(f"methods need distinct labels, got {labels}")
        names = [a.name for a in self.agents]
        if len(set(names)) != len(names):
            raise ValueError(f"agents need distinct labels, got {names}")
        needs_judge = [c for c in self.benchmarks if c.reward_basis == "task" and c.domain == "retail"]
        if needs_judge and self.judge == NONE:
            raise ValueError("retail graded on its task basis uses NL assertions: name a judge, or set reward_basis: classic")
        return self

    def to_resolved(self) -> dict[str, Any]:
        """Everything that defines the results (not how or where they are computed)."""
        return self.model_dump(mode="json", exclude={"execution", "output_dir", "tracking", "description"})


def load_job(path: Path | str) -> JobConfig:
    """Read and validate a job file; errors name the file, line and key."""
    path = Path(path)
    data, node = load_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a job file is a YAML mapping (name:, benchmarks:, methods:, ...)")
    job = validate(JobConfig, data, path, node)
    assert isinstance(job, JobConfig)
    return job
