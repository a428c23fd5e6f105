"""The job-file reference, generated from the pydantic models a job file is validated by.

:class:`~pipeline.config.job.JobConfig` and every model under it, then every registered benchmark's
cell model, method's options model and deployment kind's spec: each key with its type, default and
description. A description is the field's own (``Field(description=...)``) or the comment its
source puts on the lines above it or at the end of its line, so the reference says what the code
says and cannot drift from it (the documentation site builds it: ``scripts/mkdocs_hooks.py``).
"""

from __future__ import annotations

import ast
import enum
import inspect
import io
import json
import re
import textwrap
import tokenize
import types
from collections.abc import Iterator
from functools import cache
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, TypeAdapter
from pydantic.fields import FieldInfo

from flowstate import METHODS
from flowstate.registry import RegisteredUnion, Registry
from pipeline.benchmarks.base import BENCHMARKS
from pipeline.config.job import JobConfig
from pipeline.llm.deployments import DEPLOYMENT_KINDS

# Where each registry's entries are listed: (heading, its anchor, the job file's key that lists them).
_REGISTRY_SECTIONS: dict[str, tuple[str, str, str]] = {
    "benchmark": ("Benchmarks", "benchmarks", "benchmarks"),
    "method": ("Methods", "methods", "methods"),
    "deployment kind": ("Deployment kinds", "deployment-kinds", "deployments"),
}


@cache
def _source_comments(cls: type) -> dict[str, str]:
    """Field name -> the comment on the lines above its annotation and at the end of its line; a field
    without either, on the line right after another, shares the comment above that one when the
    comment names it (a group: ``# The cells are benchmarks × methods × agents``)."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    lines = source.splitlines()
    comments = {tok.start[0]: tok.string.lstrip("#").strip()
                for tok in tokenize.generate_tokens(io.StringIO(source).readline) if tok.type == tokenize.COMMENT}
    found: dict[str, str] = {}
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    group, previous_end = "", 0
    for node in body.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        above: list[str] = []
        line = node.lineno - 1
        while line in comments and lines[line - 1].lstrip().startswith("#"):
            above.insert(0, comments[line])
            line -= 1
        end = node.end_lineno or node.lineno
        trailing = [comments[n] for n in range(node.lineno, end + 1) if n in comments]
        if above:
            group = " ".join(above)
        elif trailing or node.lineno != previous_end + 1:
            group = ""
        named = re.search(rf"\b{node.target.id}\b", group)
        found[node.target.id] = " ".join(above + trailing) or (group if named else "")
        previous_end = end
    return found


def _description(model: type[BaseModel], name: str, field: FieldInfo) -> str:
    if field.description:
        return field.description
    for cls in model.__mro__:
        if isinstance(cls, type) and issubclass(cls, BaseModel) and name in cls.__dict__.get("__annotations__", {}):
            text = _source_comments(cls).get(name, "")
            if text:
                return text
    return ""


def _registry_of(metadata: list[Any]) -> Registry[Any] | None:
    return next((m.registry for m in metadata if isinstance(m, RegisteredUnion)), None)


def _type_text(annotation: Any, models: list[type[BaseModel]]) -> str:
    """A type as a job file's author reads it; models met on the way are added to ``models``."""
    origin = get_origin(annotation)
    if origin is Annotated:
        base, *metadata = get_args(annotation)
        registry = _registry_of(metadata)
        if registry is not None:
            _, anchor, _ = _REGISTRY_SECTIONS[registry.what]
            return f"one of the [{registry.what}s](#{anchor})"
        return _type_text(base, models)
    if origin is Literal:
        return " \\| ".join(json.dumps(a.value if isinstance(a, enum.Enum) else a) for a in get_args(annotation))
    if origin in (Union, types.UnionType):
        return " \\| ".join(_type_text(a, models) for a in get_args(annotation))
    if origin is list or origin is tuple:
        return f"list of {_type_text(get_args(annotation)[0], models)}"
    if origin is dict:
        key, value = get_args(annotation)
        return f"mapping {_type_text(key, models)} → {_type_text(value, models)}"
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " \\| ".join(json.dumps(m.value) for m in annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation not in models:
            models.append(annotation)
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    return getattr(annotation, "__name__", str(annotation).replace("typing.", ""))


def _annotation(field: FieldInfo) -> Any:
    """The field's type with the markers pydantic moved to its metadata (a registry's union)."""
    registry = _registry_of(field.metadata)
    return Annotated[field.annotation, registry.union()] if registry is not None else field.annotation


def _default_text(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True, validated_data={})
    if isinstance(value, BaseModel):  # what differs from its own table's defaults
        changed = value.model_dump(mode="json", exclude_defaults=True)
        return f"`{json.dumps(changed, ensure_ascii=False)}`, else its defaults" if changed else "its defaults"
    dumped = TypeAdapter(Any).dump_python(value, mode="json")
    return f"`{json.dumps(dumped, ensure_ascii=False)}`"


def _constraints(field: FieldInfo) -> str:
    """Bounds and patterns, as ``> 0`` or ``pattern …``."""
    signs = {"gt": ">", "ge": "≥", "lt": "<", "le": "≤"}
    found = []
    for item in field.metadata:
        for attr, sign in signs.items():
            if getattr(item, attr, None) is not None:
                found.append(f"{sign} {getattr(item, attr)}")
        for attr in ("min_length", "pattern"):
            if getattr(item, attr, None) is not None:
                found.append(f"{attr.replace('_', ' ')} `{getattr(item, attr)}`")
    return ", ".join(found)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def model_table(model: type[BaseModel], models: list[type[BaseModel]]) -> str:
    """One model's keys as a markdown table: key, type, default, description."""
    rows = ["| key | type | default | description |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        kind = _type_text(_annotation(field), models)
        bounds = _constraints(field)
        described = _description(model, name, field)
        rows.append(f"| `{name}` | {kind}{f' ({bounds})' if bounds else ''} | {_default_text(field)} "
                    f"| {_cell(described)} |")
    return "\n".join(rows)


def _doc(model: type[BaseModel]) -> str:
    own = model.__dict__.get("__doc__")
    return inspect.cleandoc(own) if own else ""


def _section(title: str, model: type[BaseModel], models: list[type[BaseModel]], level: str = "##") -> str:
    parts = [f"{level} {title}", _doc(model), model_table(model, models)]
    return "\n\n".join(p for p in parts if p)


def _nested(models: list[type[BaseModel]], done: set[type[BaseModel]]) -> Iterator[str]:
    """A section per model met in a table, and the models those tables meet, once each."""
    while models:
        model = models.pop(0)
        if model in done:
            continue
        done.add(model)
        yield _section(model.__name__, model, models, "###")


def _registry_section(registry: Registry[Any], models: list[type[BaseModel]]) -> str:
    heading, _, listed_under = _REGISTRY_SECTIONS[registry.what]
    key = registry.discriminator
    parts = [f"## {heading}",
             f"An entry under `{listed_under}:` picks its {registry.what} with `{key}:`; the rest of its keys are "
             f"that {registry.what}'s own, validated by its model (unknown keys are errors)."]
    for name, model in sorted(registry.models().items()):
        parts.append(_section(f"`{key}: {name}`", model, models, "###"))
    return "\n\n".join(parts)


def job_reference() -> str:
    """The reference of every key a job file may hold, in markdown."""
    models: list[type[BaseModel]] = []
    done: set[type[BaseModel]] = {JobConfig}
    parts = [_section("The job file", JobConfig, models)]
    registries = [_registry_section(r, models) for r in (BENCHMARKS, METHODS, DEPLOYMENT_KINDS)]
    parts += ["## Nested settings\n\nThe models the tables above and below name.", *_nested(models, done), *registries]
    return "\n\n".join(parts) + "\n"
