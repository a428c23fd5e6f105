"""The specs an episode is run from: the models of its roles, its cell and itself.

Plain data shared by every layer: a job file's model uses (:mod:`pipeline.config.job` embeds them),
a benchmark's cell base model (each benchmark narrows it), and the cell and episode specs the sweep
expands a job into (:mod:`pipeline.config.sweep`), which actors run and rows are written from.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny

from flowstate import MethodOptions


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _unset(value: object) -> bool:
    return value is None


class Sampling(Strict):
    """Generation parameters. Defaults are the paper's (appendix B.5).

    The optional settings are sent only when set (and only then part of an id): ``frequency_penalty``
    (an OpenAI parameter) to every engine; ``top_k``, ``min_p`` and ``repetition_penalty`` to engines
    that take them (vLLM; llama.cpp, whose server applies 40, 0.05 and 1.1 unasked).
    """

    temperature: float = Field(default=0.1, ge=0)
    top_p: float = Field(default=1.0, gt=0, le=1)
    max_tokens: int = Field(default=32768, gt=0)
    enable_thinking: bool = False
    top_k: int | None = Field(default=None, gt=0, exclude_if=_unset)
    min_p: float | None = Field(default=None, ge=0, le=1, exclude_if=_unset)
    repetition_penalty: float | None = Field(default=None, gt=0, exclude_if=_unset)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2, exclude_if=_unset)


#: The optional sampling settings: an engine's profile says which it takes, under which names.
OPTIONAL_SAMPLING = ("top_k", "min_p", "repetition_penalty", "frequency_penalty")


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


class EmbeddingsUse(Strict):
    """The embeddings service of methods that embed text (a deployment serving ``/v1/embeddings``)."""

    deployment: str


# A role is a model, the benchmark's own scripted test fixture ("scripted"), or nothing ("none").
RoleSetting = ModelUse | Literal["scripted", "none"]


class BenchmarkCell(BaseModel):
    """A job file's entry under ``benchmarks:``; a benchmark's own model narrows ``benchmark`` to
    ``Literal[name]`` and ``domain`` (its environment or sub-benchmark, an id column of every table)
    to its domains, and adds its options."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    benchmark: str
    domain: str
    # Options added after ids were first pinned: part of the identity only when set (not None), so
    # every earlier cell keeps its id.
    identity_when_set: ClassVar[frozenset[str]] = frozenset()

    def identity(self) -> dict[str, Any]:
        """What defines the cell's results (part of cell and episode ids)."""
        dumped = self.model_dump(mode="json")
        return {k: v for k, v in dumped.items() if v is not None or k not in self.identity_when_set}


class Cell(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cell_id: str
    label: str
    benchmark: SerializeAsAny[BenchmarkCell]
    method: SerializeAsAny[MethodOptions]
    agent: AgentModel

    @property
    def domain(self) -> str:
        return self.benchmark.domain


class EpisodeSpec(BaseModel):
    """Everything an actor needs to run one episode (besides the job's deployments)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    episode_id: str
    sweep_id: str
    cell: Cell
    task_id: str
    trial: int
    seed: int
    user_simulator: ModelUse | str
    judge: ModelUse | str
    # Unset roles fall back to the cell's agent model (see JobConfig).
    tool_model: ModelUse | None = None
    memory: ModelUse | None = None
    embeddings: EmbeddingsUse | None = None


