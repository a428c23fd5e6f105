"""Load YAML keeping line numbers, so validation errors can say where in the file they are."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from pydantic import BaseModel, ValidationError

from flowstate.errors import FlowStateError
from pipeline.config.variables import VariableError, children, compose_expanded, construct, unique_nodes


class ConfigError(FlowStateError, ValueError):
    """A job file that cannot be used; the message names the file, line, key and expectation."""


# A job file is a few hundred YAML nodes (the shipped ones 66 to 170). An alias stands for the whole
# node its anchor names, so a file of 1 KB can stand for 10^8 nodes ("billion laughs"), and whatever
# walks the data (validation, ids, the manifest) walks every one: a file is refused beyond this many
# nodes with its aliases expanded, which also bounds the memory a valid job takes.
MAX_NODES = 100_000
_MERGE = "tag:yaml.org,2002:merge"


class LoadedYaml(NamedTuple):
    data: Any
    node: yaml.Node | None  # for the line numbers of validation errors
    variables: dict[str, str]  # the ``${NAME}`` references it used: name -> value


def load_yaml(path: Path, environ: Mapping[str, str] | None = None) -> LoadedYaml:
    """Parse ``path``, its ``${NAME}`` references expanded from the environment inside the scalars
    that hold them (:mod:`pipeline.config.variables`: nothing else is read, nothing is run)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    try:
        node, variables = compose_expanded(text, path, environ)
        _check_structure(node, path)
        data = construct(node)
    except VariableError as exc:
        raise ConfigError(str(exc)) from None
    except RecursionError:  # the parser recurses once per level of nesting
        raise ConfigError(f"{path}: not valid YAML: nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{where}: not valid YAML: {problem}") from None
    return LoadedYaml(data, node, variables)


def _check_structure(node: yaml.Node | None, path: Path) -> None:
    """Refuse, before anything walks the data, a file that expands beyond :data:`MAX_NODES`, and a
    mapping that repeats a key (YAML would keep the last value, silently)."""
    size = expanded_size(node)
    if size is None:
        raise ConfigError(f"{path}: an alias names a node that contains it, so the file expands without end")
    if size > MAX_NODES:
        raise ConfigError(f"{path}: its aliases expand it to {size:,} YAML nodes, beyond the {MAX_NODES:,} a job file "
                          "may hold (an alias counts as every node its anchor names)")
    for mapping in unique_nodes(node):
        if isinstance(mapping, yaml.MappingNode):
            _check_keys(mapping, path)


def _check_keys(mapping: yaml.MappingNode, path: Path) -> None:
    """Each key once (a merge ``<<`` may be overridden: that is what it is for)."""
    first: dict[tuple[str, str], yaml.Node] = {}
    for key, _ in mapping.value:
        if not isinstance(key, yaml.ScalarNode) or key.tag == _MERGE:
            continue
        earlier = first.setdefault((key.tag, key.value), key)
        if earlier is not key:
            raise ConfigError(f"{path}:{key.start_mark.line + 1}: duplicate key {key.value!r} (first on line "
                              f"{earlier.start_mark.line + 1}): a key may appear once in a mapping")


def expanded_size(node: yaml.Node | None) -> int | None:
    """The number of nodes of the tree with every alias expanded (a node counts once per place it
    is used), computed over the node graph in one pass: linear in the file, whatever it stands for.
    None: without end (an alias inside the node its anchor names)."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()  # entered, not finished: the nodes on the path from the root
    stack: list[tuple[yaml.Node, bool]] = [(node, False)] if node is not None else []
    while stack:
        current, finished = stack.pop()
        key = id(current)
        if finished:
            open_nodes.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in children(current))
        elif key in open_nodes:
            return None
        elif key not in sizes:
            open_nodes.add(key)
            stack.append((current, True))
            stack.extend((child, False) for child in children(current))
    return sizes[id(node)] if node is not None else 0


def validate(model: type[BaseModel], data: Any, path: Path, node: yaml.Node | None) -> BaseModel:
    """``model.model_validate(data)`` with errors rewritten as ``file:line: key: problem``."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        lines = [_describe(err, data, path, node) for err in exc.errors()]
        raise ConfigError("\n".join(lines)) from None


def _data_loc(data: Any, loc: tuple[Any, ...]) -> list[Any]:
    """``loc`` without the parts pydantic adds for unions (the matched member or tag), by
    following the actual data: a string that is not a key at that point is such a part."""
    clean: list[Any] = []
    for i, part in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(data, dict):
            if part in data or last:
                clean.append(part)
                data = data.get(part)
            continue
        if isinstance(data, list) and isinstance(part, int) and part < len(data):
            clean.append(part)
            data = data[part]
            continue
        if not _is_union_tag(part) and not isinstance(data, (dict, list)) and last:
            clean.append(part)
    return clean


def _describe(err: Any, data: Any, path: Path, node: yaml.Node | None) -> str:
    loc = _data_loc(data, err["loc"])
    key = ".".join(str(p) for p in loc) or "(top level)"
    line = _line_of(node, loc)
    where = f"{path}:{line}" if line else str(path)
    if err["type"] == "extra_forbidden":
        return f"{where}: unknown key '{key}'"
    if err["type"] == "missing":
        return f"{where}: missing key '{key}'"
    return f"{where}: {key}: {err['msg']} (got {err.get('input')!r})"


def _is_union_tag(part: Any) -> bool:
    # pydantic puts the matched union member (e.g. "llamacpp" or "function-after[...]") in the path.
    return isinstance(part, str) and ("[" in part or part.startswith("function-"))


def _line_of(node: yaml.Node | None, loc: list[Any]) -> int | None:
    """The line of the deepest node on ``loc`` that exists in the file (1-based)."""
    best = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = next((v for k, v in node.value if k.value == str(part)), None)
            key_node = next((k for k, v in node.value if k.value == str(part)), None)
            if match is None:
                return best
            best = (key_node or match).start_mark.line + 1
            node = match
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            best = node.start_mark.line + 1
        else:
            return best
    return best
