"""Job files (jobs/*.yaml) as strict pydantic models.

A job names the benchmark cells, the methods, the agent models and the other model roles of an
episode (user simulator, judge, tool model, the methods' memory model, embeddings; each served by a
named deployment), trials and seeds, limits, execution settings, where results go, which MLflow
experiment tracks them and what the analysis compares. ``benchmarks:``, ``methods:`` and
``deployments:`` are unions of the registered plug-ins, discriminated on ``benchmark``, ``name`` and
``kind``. Unknown keys and wrong types are errors that name the file, line and key before anything
starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import ConfigDict, Field, PrivateAttr, model_validator

from flowstate import METHODS, Capability, LoopLimits, MethodOptions
from flowstate.registry import rebuild_when_changed
from pipeline.benchmarks.base import BENCHMARKS, benchmark_of
from pipeline.config.secrets import Secrets
from pipeline.config.yaml_loader import ConfigError, load_yaml, validate
from pipeline.core.cost import CostModel
from pipeline.core.plugins import load_plugins
from pipeline.core.specs import (
    OPTIONAL_SAMPLING,
    AgentModel,
    BenchmarkCell,
    EmbeddingsUse,
    ModelUse,
    RoleSetting,
    Strict,
)
from pipeline.llm.deployments import DEPLOYMENT_KINDS, DeploymentSpec


class Execution(Strict):
    """How the sweep runs; changing these never changes sweep or episode ids."""

    # Episodes in flight at once, over all actors.
    concurrency: int = Field(default=16, gt=0)
    # Episode actors; 0 = one per CPU Ray reports (at most one per 8 in-flight episodes).
    actors: int = Field(default=0, ge=0)
    # Attempts per episode after an infrastructure failure (actor died, endpoint down).
    episode_attempts: int = Field(default=3, gt=0)
    episode_timeout_s: float = Field(default=3600, gt=0)  # one episode attempt's wall-clock limit
    # The most episodes the job may expand to (counted before any is made): a typo in trials or
    # tasks is refused, not planned until memory runs out.
    max_episodes: int = Field(default=10_000_000, gt=0)


class Tracking(Strict):
    experiment: str | None = None  # default: the job's name
    tracking_uri: str | None = None  # default: MLFLOW_TRACKING_URI or MLflow's own default
    trace_samples_per_cell: int = Field(default=3, ge=0)  # episodes per cell logged as MLflow traces
    # How often the driver pushes the cells' live metrics to MLflow while episodes finish.
    live_every_s: float = Field(default=5.0, gt=0)


class Analysis(Strict):
    """What the report, the SQL and MLflow compare (never part of any id)."""

    # The method (label, or name when one label has it) the others are compared with; None: no Δ.
    baseline: str | None = None
    # A tokenizer that counts the tokens of calls no server counts (scripted fixtures, e.g. the
    # oracle), labelled as counted: `smollm2` (the embedded model's) or a GGUF file's path.
    count_tokens: str | None = None
    # Seconds of accelerator time per uncached prompt token and per completion token, for the
    # report's GPU-time estimate (pipeline/core/cost.py; llama.cpp cells have measured defaults).
    cost_model: CostModel | None = None


# Fields that do not define results (left out of the sweep id), and roles added after the first
# schema (left out of it while unset, so the ids of older jobs stay the same).
NOT_RESULTS = {"execution", "output_dir", "tracking", "description", "analysis", "plugins"}
_LATER_ROLES = ("tool_model", "memory", "embeddings")


class JobConfig(Strict):
    # The unions of registered plug-ins are built on first use (after the job's own plug-ins are
    # imported), not when this module is.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    # The sweep id is this name plus a hash of what defines the results.
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    description: str = ""  # free text, recorded in the manifest and MLflow; no part of any id
    # Modules to import first (they register benchmarks, methods or deployment kinds of the user's).
    plugins: list[str] = []
    # The cells are benchmarks × methods × agents: each benchmark entry (a domain and its tasks),
    # each method, each agent model.
    benchmarks: list[Annotated[BenchmarkCell, BENCHMARKS.union()]] = Field(min_length=1)
    methods: list[Annotated[MethodOptions, METHODS.union()]] = Field(min_length=1)
    agents: list[AgentModel] = Field(min_length=1)
    # The benchmark's other roles, user_simulator and judge: a model, its own scripted test fixture, or none.
    user_simulator: RoleSetting = "none"
    judge: RoleSetting = "none"
    # The model a benchmark's tools call (e.g. a reasoning tool); None: each cell's agent model.
    tool_model: ModelUse | None = None
    # The model memory methods write and read with; None: each cell's agent model (as the paper runs it).
    memory: ModelUse | None = None
    embeddings: EmbeddingsUse | None = None  # for methods that embed text: a deployment serving /v1/embeddings
    # The model servers by name, started once per sweep and shared by every episode.
    deployments: dict[str, DeploymentSpec] = {}
    trials: int = Field(default=1, gt=0)  # episodes per task and cell, each with its own seed
    # Upstream τ-bench seeds Python's RNG with 300 and draws one seed per trial.
    seed: int = 300
    limits: LoopLimits = LoopLimits()
    execution: Execution = Execution()
    output_dir: Path = Path("runs")  # where the sweep's folder goes (`flowstate run --out` overrides it)
    tracking: Tracking = Tracking()
    analysis: Analysis = Analysis()
    # The ``${NAME}`` references its file used (name -> value), for telling its secrets apart.
    _variables: dict[str, str] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _check_references(self) -> JobConfig:
        uses: list[tuple[str, ModelUse | EmbeddingsUse]] = [(f"agents[{i}]", a) for i, a in enumerate(self.agents)]
        uses += [(role, use) for role, use in self.roles().items() if isinstance(use, ModelUse | EmbeddingsUse)]
        for where, use in uses:
            if use.deployment not in self.deployments:
                known = ", ".join(sorted(self.deployments)) or "none defined"
                raise ValueError(f"{where}.deployment {use.deployment!r} is not under 'deployments' (defined: {known})")
            serves_embeddings = getattr(self.deployments[use.deployment], "embedding", None)
            if isinstance(use, EmbeddingsUse) and serves_embeddings is False:
                raise ValueError(f"{where}.deployment {use.deployment!r} serves chat: give it embedding: true")
            if isinstance(use, ModelUse) and serves_embeddings:
                raise ValueError(f"{where}.deployment {use.deployment!r} serves embeddings only, not chat")
            profile = self.deployments[use.deployment].profile()
            refused = [k for k in OPTIONAL_SAMPLING
                       if isinstance(use, ModelUse) and getattr(use.sampling, k) is not None and k not in profile.sampling_names]
            if refused:
                raise ValueError(f"{where}.sampling: {', '.join(refused)}: not taken by engine {profile.name!r} "
                                 f"(deployment {use.deployment!r}), which takes {', '.join(profile.sampling_names)}")
        labels = [m.display for m in self.methods]
        if len(set(labels)) != len(labels):
            raise ValueError(f"methods need distinct labels, got {labels}")
        names = [a.name for a in self.agents]
        if len(set(names)) != len(names):
            raise ValueError(f"agents need distinct labels, got {names}")
        roles = self.roles()
        for cell in self.benchmarks:
            benchmark = benchmark_of(cell)
            for role, setting in roles.items():
                if setting == "scripted" and role not in benchmark.scripted_roles:
                    raise ValueError(f"{role}: scripted, but benchmark {cell.benchmark!r} has no scripted {role} "
                                     f"(it has: {', '.join(sorted(benchmark.scripted_roles)) or 'none'})")
            benchmark.check_roles(cell, roles)
        for method in self.methods:
            if Capability.EMBEDDINGS in METHODS.get(method.name).uses(method) and self.embeddings is None:
                raise ValueError(f"method {method.display!r} embeds text: name a deployment under 'embeddings:'")
        return self

    def roles(self) -> dict[str, Any]:
        """The episode roles the job sets, besides the agents (absent: not set)."""
        roles: dict[str, Any] = {"user_simulator": self.user_simulator, "judge": self.judge}
        roles.update({role: getattr(self, role) for role in _LATER_ROLES if getattr(self, role) is not None})
        return roles

    def to_resolved(self) -> dict[str, Any]:
        """Everything that defines the results (not how or where they are computed, nor what is
        compared), secrets redacted: they never enter an id."""
        data = self.model_dump(mode="json", exclude=NOT_RESULTS)
        data["benchmarks"] = [cell.identity() for cell in self.benchmarks]
        for name, spec in self.deployments.items():
            for field in spec.placement_fields:
                data["deployments"][name].pop(field, None)
        for role in _LATER_ROLES:
            if data.get(role) is None:
                data.pop(role, None)
        return self.secrets().redact(data)

    def secrets(self) -> Secrets:
        """This job's secrets (:mod:`pipeline.config.secrets`), API keys read from the environment now."""
        return Secrets.of_job(self.model_dump(mode="json"), self._variables)

    def written_names(self) -> dict[str, str]:
        """Values written as they are into results (directory, rows, MLflow run names, each call's
        ``served_by`` and served model): where each is set, and the value."""
        names = {"name": self.name, **({"tracking.experiment": self.tracking.experiment} if self.tracking.experiment else {})}
        names |= {f"agents[{i}].label": a.name for i, a in enumerate(self.agents)}
        names |= {f"methods[{i}].label": m.display for i, m in enumerate(self.methods)}
        names |= {f"benchmarks[{i}].domain": b.domain for i, b in enumerate(self.benchmarks)}
        names |= {f"deployments.{n}.{field}": value for n, d in self.deployments.items() for field in ("base_url", "model")
                  if isinstance(value := getattr(d, field, None), str)}
        return names


_rebuild_job_model = rebuild_when_changed(JobConfig, BENCHMARKS, METHODS, DEPLOYMENT_KINDS)


def _load_plugins_of(data: dict[str, Any], where: str) -> None:
    """Import the plug-ins a job names, so that the unions of its models know them."""
    plugins = data.get("plugins") or []
    if not isinstance(plugins, list) or not all(isinstance(p, str) for p in plugins):
        raise ConfigError(f"{where}: plugins: a list of Python module names")
    load_plugins(plugins)
    _rebuild_job_model()


def parse_job(data: dict[str, Any]) -> JobConfig:
    """A job from a mapping (a manifest's resolved job, say), after importing the plug-ins it names."""
    _load_plugins_of(data, "job")
    return JobConfig.model_validate(data)


def _check_labels(job: JobConfig, path: Path) -> None:
    """What a job file may not ask of its labels (a job read back from a manifest is taken as it ran):
    a ``|`` or a line break, which would break the report's Markdown tables, and a baseline that is
    no method's label, whose comparisons would all come out empty."""
    labels = {f"methods[{i}].label": m.display for i, m in enumerate(job.methods)}
    labels |= {f"agents[{i}].{'label' if a.label else 'deployment'}": a.name for i, a in enumerate(job.agents)}
    for where, label in labels.items():
        if any(c in label for c in "|\n\r"):
            raise ConfigError(f"{path}: {where}: {label!r}: a label may not hold '|' or a line break "
                              "(labels are columns of the report's tables)")
    baseline, methods = job.analysis.baseline, [m.display for m in job.methods]
    # As the report resolves it: "full_context" is the label "full_context-json" when that is the only one.
    family = [m for m in methods if m.startswith(f"{baseline}-")]
    if baseline is not None and baseline not in methods and len(family) != 1:
        raise ConfigError(f"{path}: analysis.baseline: {baseline!r} is not the label of one of the job's methods "
                          f"({', '.join(methods)}): every comparison with it would be empty")


def load_job(path: Path | str) -> JobConfig:
    """Read and validate a job file; errors name the file, line and key."""
    path = Path(path)
    data, node, variables = load_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a job file is a YAML mapping (name:, benchmarks:, methods:, ...)")
    _load_plugins_of(data, str(path))
    try:
        job = validate(JobConfig, data, path, node)
    except ConfigError as exc:  # its messages quote the values they refuse
        raise ConfigError(Secrets.of_job(data, variables).redact(str(exc))) from None
    assert isinstance(job, JobConfig)
    job._variables = variables
    secrets = job.secrets()
    for where, value in job.written_names().items():
        if secrets.redact(value) != value:
            raise ConfigError(f"{path}: {where} holds a secret, and it is written as it is into results and logs: "
                              "give keys through api_key_env")
    _check_labels(job, path)
    return job
