"""Per-domain registry and loaders: databases, tools, tool schemas, tasks, policy texts.

Everything parsed from a data file is cached per process and file version, so that an episode
costs no file I/O: the 7 MB airline database is parsed and validated once.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict

from pipeline.benchmarks.base import UnknownTaskError
from pipeline.benchmarks.taubench import airline_models, retail_models
from pipeline.benchmarks.taubench.airline import AirlineTools
from pipeline.benchmarks.taubench.data import SHA256, DataDir, Domain, load_parsed
from pipeline.benchmarks.taubench.database import EpisodeDB, InitialDB, canonical_tables
from pipeline.benchmarks.taubench.records import UpstreamRecord
from pipeline.benchmarks.taubench.retail import RetailTools
from pipeline.benchmarks.taubench.tasks import Task
from pipeline.benchmarks.taubench.toolkit import ToolKit
from pipeline.core.data import cached_json

ToolKind = Literal["read", "write", "generic"]


@dataclass(frozen=True)
class DomainSpec:
    name: Domain
    models: Mapping[str, type[UpstreamRecord]]
    toolkit: type[ToolKit]


SPECS: dict[str, DomainSpec] = {
    "airline": DomainSpec("airline", airline_models.COLLECTIONS, AirlineTools),
    "retail": DomainSpec("retail", retail_models.COLLECTIONS, RetailTools),
}


def _spec(domain: str) -> DomainSpec:
    if domain not in SPECS:
        raise ValueError(f"Unknown τ-bench domain {domain!r}; expected one of {sorted(SPECS)}")
    return SPECS[domain]


class ToolSchemas(BaseModel):
    """``tools.json``: the function schemas the agent receives and each tool's kind."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tools: list[dict[str, Any]]
    kinds: dict[str, ToolKind]


def _parse_db(domain: str, raw: bytes) -> InitialDB:
    """The canonical database, validated once per machine: validating 10 MB of records costs each
    new process (every episode actor) over half a second, reading them back as JSON a quarter."""
    models = SPECS[domain].models
    key = f"{domain}-{SHA256[f'{domain}/db.json'][:16]}-{_code_fingerprint(models)}"
    return InitialDB.from_canonical(domain, cached_json("taubench", key, lambda: canonical_tables(json.loads(raw), models)))


def _code_fingerprint(models: Mapping[str, type[UpstreamRecord]]) -> str:
    """What the canonical form depends on besides the file: the models' source and pydantic's version."""
    digest = hashlib.sha256(pydantic.VERSION.encode())
    modules = sorted({cls.__module__ for model in models.values() for cls in model.__mro__
                      if cls.__module__.startswith("pipeline.")})
    for module in modules:
        digest.update(Path(sys.modules[module].__file__ or module).read_bytes())
    return digest.hexdigest()[:16]


# One parser object per domain: load_parsed caches by parser identity and file version.
_DB_PARSERS = {domain: partial(_parse_db, domain) for domain in SPECS}


def _tasks(raw: bytes) -> tuple[Task, ...]:
    return tuple(Task.model_validate(item) for item in json.loads(raw))


def _tool_schemas(raw: bytes) -> ToolSchemas:
    return ToolSchemas.model_validate_json(raw)


def _json(raw: bytes) -> Any:
    return json.loads(raw)


def _text(raw: bytes) -> str:
    return raw.decode("utf-8")


def initial_db(domain: str, data_dir: DataDir = None) -> InitialDB:
    _spec(domain)
    return load_parsed(f"{domain}/db.json", _DB_PARSERS[domain], data_dir)


def fresh_db(domain: str, data_dir: DataDir = None) -> EpisodeDB:
    """A new episode database: O(1), the initial records are shared copy-on-write."""
    return initial_db(domain, data_dir).fresh()


def toolkit_for(db: EpisodeDB) -> ToolKit:
    return _spec(db.domain).toolkit(db)


def tool_schemas(domain: str, data_dir: DataDir = None) -> ToolSchemas:
    _spec(domain)
    return load_parsed(f"{domain}/tools.json", _tool_schemas, data_dir)


def policy(domain: str, data_dir: DataDir = None) -> str:
    _spec(domain)
    return load_parsed(f"{domain}/policy.md", _text, data_dir)


def simulation_guidelines(data_dir: DataDir = None) -> str:
    return load_parsed("user_simulator/simulation_guidelines.md", _text, data_dir)


def load_tasks(domain: str, data_dir: DataDir = None) -> tuple[Task, ...]:
    _spec(domain)
    return load_parsed(f"{domain}/tasks.json", _tasks, data_dir)


def get_task(domain: str, task_id: str, data_dir: DataDir = None) -> Task:
    for task in load_tasks(domain, data_dir):
        if task.id == task_id:
            return task
    raise UnknownTaskError(f"No {domain} task with id {task_id!r}")


def task_split(domain: str, split: str, data_dir: DataDir = None) -> list[str]:
    """Task ids of an upstream split (``train``, ``test`` or ``base``)."""
    _spec(domain)
    splits: dict[str, list[str]] = load_parsed(f"{domain}/split_tasks.json", _json, data_dir)
    if split not in splits:
        raise KeyError(f"No split {split!r} for {domain}; expected one of {sorted(splits)}")
    return list(splits[split])
