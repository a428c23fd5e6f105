"""MemoryArena's data: the four configs' task files (CONTRACT §1), the verbatim prompt strings and
tool schemas, and the travel database, all read from ``$FLOWSTATE_DATA/memoryarena/``.

Task files are the Hugging Face JSONL rows, one task per line, in file order (upstream iterates in
file order); lines starting with ``#`` (the synthetic examples' notes) and blank lines are skipped.
A malformed row is an error naming the file, the line and the field. Only the fields the contract
lists are required; others are ignored.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError, model_validator

from pipeline.core.commands import flowstate_command
from pipeline.core.data import DATA_ENV_VAR, BenchmarkDataError

SUBDIR = "memoryarena"
Config = Literal["bundled_shopping", "group_travel_planner", "formal_reasoning_math", "formal_reasoning_phys"]
CONFIGS: tuple[Config, ...] = ("bundled_shopping", "group_travel_planner", "formal_reasoning_math", "formal_reasoning_phys")
# "hf": the benchmark's files (``<config>/data.jsonl``); "examples": the synthetic test records.
Source = Literal["hf", "examples"]

HF_DATASET = "ZexueHe/memoryarena"
HF_REVISION = "da1a37c8b19280e18627ca01cf368195a5e1d92e"
# SHA-256 of the four files at that revision, as third parties record them (SOURCE.md): not checked
# here (Hugging Face is out of reach); `flowstate data fetch memoryarena` checks them on download.
HF_SHA256: dict[str, str] = {
    "bundled_shopping": "4411a2da528a33dc6aca519b49cc225895363f18b2d19b191fddb501200134ef",
    "group_travel_planner": "2f955d444f6f3ad3c5da2064359ab19f8fc1f90621ff9d00723a450a009c3732",
    "formal_reasoning_math": "ff5b0ad575847c7476a02d1e35661592a833bd0cff384cb54bc6f35b46de7803",
    "formal_reasoning_phys": "580862006af2ff2bfc8c5d2d2b9a60bf33a46cbb64f27d60a2bfe039aec61cf6",
}
# Checksums a user accepted with `flowstate data fetch memoryarena --accept-new-checksums`.
ACCEPTED_CHECKSUMS = "accepted_checksums.json"


class MemoryArenaDataError(BenchmarkDataError):
    """A MemoryArena file is missing, malformed or not what the pinned revision holds."""


def data_root(data_dir: str | Path | None = None) -> Path:
    import os

    root = data_dir if data_dir is not None else os.environ.get(DATA_ENV_VAR)
    if not root:
        raise MemoryArenaDataError(f"No MemoryArena data directory: set {DATA_ENV_VAR} to the folder that holds "
                                   f"{SUBDIR}/, or run `{flowstate_command('data fetch memoryarena')}`.")
    return Path(root).expanduser().resolve() / SUBDIR


def task_file(config: Config, source: Source = "hf", data_dir: str | Path | None = None) -> Path:
    root = data_root(data_dir)
    return root / config / "data.jsonl" if source == "hf" else root / "examples" / f"{config}.synthetic.jsonl"


# -- records (CONTRACT §1) ------------------------------------------------------------------------
class _Row(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    id: StrictInt


class ShoppingAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    target_asin: StrictStr
    attributes: list[StrictStr]


class ShoppingTask(_Row):
    category: StrictStr
    questions: list[StrictStr] = Field(min_length=1)
    answers: list[ShoppingAnswer]

    @model_validator(mode="after")
    def _same_length(self) -> ShoppingTask:
        return _check_lengths(self, "questions", "answers")


# A day of a plan as the file has it: graders read keys that may be missing (then "-") or null.
Day = Annotated[dict[str, Any], Field()]


class BasePerson(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    name: StrictStr
    query: StrictStr
    daily_plans: list[Day]


class TravelTask(_Row):
    base_person: BasePerson
    questions: list[StrictStr] = Field(min_length=1)
    answers: list[list[Day]]

    @model_validator(mode="after")
    def _same_length(self) -> TravelTask:
        return _check_lengths(self, "questions", "answers")


class FormalTask(_Row):
    paper_name: StrictStr
    questions: list[StrictStr] = Field(min_length=1)
    answers: list[StrictStr]
    backgrounds: list[StrictStr]

    @model_validator(mode="after")
    def _same_length(self) -> FormalTask:
        return _check_lengths(self, "questions", "answers", "backgrounds")


Task = ShoppingTask | TravelTask | FormalTask
RECORDS: dict[str, type[Task]] = {
    "bundled_shopping": ShoppingTask, "group_travel_planner": TravelTask,
    "formal_reasoning_math": FormalTask, "formal_reasoning_phys": FormalTask,
}


def _check_lengths(task: Any, *fields: str) -> Any:
    lengths = {f: len(getattr(task, f)) for f in fields}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"{', '.join(fields)} must have the same length, got {lengths}")
    return task


def parse_tasks(text: str, config: Config, where: str) -> list[Task]:
    """Every task of a JSONL text, in order; errors name ``where``, the line and the field."""
    model = RECORDS[config]
    tasks: list[Task] = []
    seen: dict[int, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise MemoryArenaDataError(f"{where}:{number}: not a JSON object ({exc.msg} at column {exc.colno})") from None
        if not isinstance(data, dict):
            raise MemoryArenaDataError(f"{where}:{number}: a task is a JSON object, got {type(data).__name__}")
        try:
            task = model.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'row'}: {e['msg']}" for e in exc.errors())
            raise MemoryArenaDataError(f"{where}:{number}: {config} task: {problems}") from None
        if task.id in seen:
            raise MemoryArenaDataError(f"{where}:{number}: task id {task.id} repeats line {seen[task.id]}")
        seen[task.id] = number
        tasks.append(task)
    return tasks


_loaded: dict[tuple[str, Config, int, int], list[Task]] = {}


def load_tasks(path: Path, config: Config) -> list[Task]:
    """The tasks of a file (parsed once per process per file version)."""
    try:
        stat = path.stat()
    except OSError as exc:
        raise MemoryArenaDataError(f"MemoryArena task file {path} is missing ({exc.strerror}): run "
                                   f"`{flowstate_command('data fetch memoryarena')}`, or set {DATA_ENV_VAR}") from None
    key = (str(path), config, stat.st_size, stat.st_mtime_ns)
    if key not in _loaded:
        _loaded[key] = parse_tasks(path.read_text(encoding="utf-8"), config, str(path))
    return _loaded[key]


# -- verbatim strings and schemas --------------------------------------------------------------------
@cache
def prompts(data_dir: str | None = None) -> dict[str, Any]:
    """prompts.json: every agent- and judge-visible string, verbatim."""
    return _json(data_root(data_dir) / "prompts.json")


@cache
def travel_tool_schemas(data_dir: str | None = None) -> dict[str, Any]:
    """travel_tools.json: the six travel tools' schemas (under ``tools``), in upstream order."""
    return _json(data_root(data_dir) / "travel_tools.json")


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise MemoryArenaDataError(f"{path} is missing ({exc.strerror}): set {DATA_ENV_VAR} to the folder that holds "
                                   f"{SUBDIR}/") from None
