"""``${NAME}`` and ``${NAME:-default}`` in job files: values from the environment, inside YAML scalars.

Expansion reads the environment (``os.environ``, or the mapping given) and nothing else. It runs
nothing: there is no shell, ``$(...)``, backticks and ``$NAME`` are plain text, and a value is never
expanded again (a value holding ``${OTHER}`` stays that text). It happens after the YAML structure
is parsed, inside the scalar that holds the reference, so a value can never add a key, an item or a
``plugins:`` entry (which would import a module): a newline or ``key: value`` inside a value stays
text. A plain (unquoted) scalar is typed from its expanded text as YAML types any plain scalar
(``replicas: ${N}`` with N=2 is the integer 2); a quoted one stays a string.

Grammar: ``NAME`` is ASCII letters, digits and ``_``, not starting with a digit; a default is any
text without ``$``, ``{``, ``}`` or a newline (so ``${A:-${B}}`` and ``${A:-$(cmd)}`` are refused,
not half-read); ``$${`` is a literal ``${``. Any other ``${`` is an error naming the file and line.
References in comments are ignored.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from flowstate.errors import FlowStateError


class VariableError(FlowStateError, ValueError):
    """A reference that cannot be expanded: unset without a default, or not a reference at all."""


_START = re.compile(r"\$?\$\{")
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^${}\n]*))?\}", re.ASCII)
_SNIPPET = re.compile(r"\$\{[^}\n]{0,60}\}?")
# Plain scalars typed from their expanded text; a value that YAML would read as a merge key or a
# "value" indicator stays a string.
_TYPED = {f"tag:yaml.org,2002:{t}" for t in ("null", "bool", "int", "float", "timestamp", "str")}


@dataclass(frozen=True)
class _Slot:
    """One ``${...}`` of the file text: a reference (``name``), a literal ``${``, or a malformed one."""

    line: int
    source: str  # as written
    name: str | None = None
    default: str | None = None
    literal: bool = False
    malformed: str | None = None


class _Placeholders:
    """The file text with every ``${...}`` replaced by a token YAML reads as plain text anywhere
    (block or flow context), so the structure is parsed before any value is known."""

    def __init__(self, text: str) -> None:
        nonce = secrets.token_hex(8)
        self.token = re.compile(f"FLOWSTATEVAR{nonce}N([0-9]+)X")
        self.slots: list[_Slot] = []
        out: list[str] = []
        pos = 0
        while (start := _START.search(text, pos)) is not None:
            out.append(text[pos:start.start()])
            line = text.count("\n", 0, start.start()) + 1
            if start.group() == "$${":
                slot, pos = _Slot(line, "$${", literal=True), start.end()
            elif (ref := _REFERENCE.match(text, start.start())) is not None:
                slot, pos = _Slot(line, ref.group(), name=ref.group(1), default=ref.group(2)), ref.end()
            else:
                snippet = _SNIPPET.match(text, start.start())
                slot, pos = _Slot(line, "${", malformed=snippet.group() if snippet else "${"), start.end()
            out.append(f"FLOWSTATEVAR{nonce}N{len(self.slots)}X")
            self.slots.append(slot)
        out.append(text[pos:])
        self.text = "".join(out)

    def fill(self, text: str, where: str, environ: Mapping[str, str], used: dict[str, str]) -> str:
        """``text`` (holding placeholders) with each reference's value."""
        return self.token.sub(lambda m: _value(self.slots[int(m.group(1))], where, environ, used), text)

    def restore(self, text: str) -> str:
        """``text`` (holding placeholders) with each ``${...}`` as the file wrote it."""
        return self.token.sub(lambda m: self.slots[int(m.group(1))].source, text)


def children(node: yaml.Node) -> list[yaml.Node]:
    """A node's items, or its keys and values in turn; a scalar has none."""
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [item for pair in node.value for item in pair]
    return []


def unique_nodes(node: yaml.Node | None) -> Iterator[yaml.Node]:
    """Every node of the tree once, in file order (keys included; an alias is the node it names)."""
    seen: set[int] = set()
    stack = [node] if node is not None else []
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        stack.extend(reversed(children(current)))


def _scalars(node: yaml.Node | None) -> Iterator[yaml.ScalarNode]:
    return (n for n in unique_nodes(node) if isinstance(n, yaml.ScalarNode))


def _value(slot: _Slot, where: str, environ: Mapping[str, str], used: dict[str, str]) -> str:
    if slot.literal:
        return "${"
    if slot.malformed is not None:
        raise VariableError(f"{where}:{slot.line}: {slot.malformed!r} is not a variable reference: write ${{NAME}} "
                            "or ${NAME:-default} (NAME: letters, digits and _; a default without $, { or }); "
                            "$${ is a literal ${")
    assert slot.name is not None
    if slot.name in environ:
        value = environ[slot.name]
    elif slot.default is not None:
        value = slot.default
    else:
        raise VariableError(f"{where}:{slot.line}: environment variable {slot.name} is not set "
                            f"(and ${{{slot.name}}} has no :-default)")
    used[slot.name] = value
    return value


def compose_expanded(text: str, where: str | Path,
                     environ: Mapping[str, str] | None = None) -> tuple[yaml.Node | None, dict[str, str]]:
    """The YAML node tree of ``text`` with its references expanded in the scalars that hold them,
    and the variables used (name -> value). Raises :class:`VariableError` or ``yaml.YAMLError``."""
    environ = os.environ if environ is None else environ
    placeholders = _Placeholders(text)
    node = yaml.compose(placeholders.text, Loader=yaml.SafeLoader)
    used: dict[str, str] = {}
    resolver = yaml.SafeLoader("")
    try:
        for scalar in _scalars(node):
            expanded = placeholders.fill(scalar.value, str(where), environ, used)
            if expanded == scalar.value:
                continue
            scalar.value = expanded
            if scalar.style is None:  # plain: typed from the text, as YAML types it
                tag = resolver.resolve(yaml.ScalarNode, expanded, (True, False))
                scalar.tag = tag if tag in _TYPED else "tag:yaml.org,2002:str"
    finally:
        resolver.dispose()
    return node, used


def construct(node: yaml.Node | None) -> object:
    """Python data from a (safe) node tree: what ``yaml.safe_load`` would return for it."""
    if node is None:
        return None
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_document(node)
    finally:
        loader.dispose()


def compose_as_written(text: str) -> yaml.Node | None:
    """The YAML node tree of ``text`` with every ``${...}`` left as written: no variable is read."""
    placeholders = _Placeholders(text)
    node = yaml.compose(placeholders.text, Loader=yaml.SafeLoader)
    for scalar in _scalars(node):
        scalar.value = placeholders.restore(scalar.value)
    return node


def expand_variables(text: str, where: str | Path = "<text>", environ: Mapping[str, str] | None = None) -> str:
    """One string's references expanded (a tracking URI the manifest keeps as ``${NAME}``), with
    the same grammar and errors as a job file's."""
    placeholders = _Placeholders(text)
    return placeholders.fill(placeholders.text, str(where), os.environ if environ is None else environ, {})
