"""Rebuild ``<domain>/tools.json`` from upstream's tool sources by parsing them — never importing or running them.

Upstream (tau2 ``ToolKitBase.get_tools`` + ``Tool.openai_schema``) builds the schemas at run time:

* the tools are the toolkit class's ``@is_tool(ToolType.X)`` methods in definition order; ``X`` is the kind;
* name = method name; description = the docstring's first line, plus ``"\\n\\n"`` and the rest of the
  text before the first section when there is a rest (``docstring_parser``'s short/long split — hence
  the blank line it inserts after a first line that merely wraps);
* parameters = ``create_model("parameters", name=(annotation, Field(default, description=...)))
  .model_json_schema()``, the descriptions coming from the docstring's ``Args:`` entries.

This module reproduces those rules on the syntax tree for the annotations tool signatures use (str,
int, float, bool, dict, list/List, Optional, Union/``|``, Literal, module-level aliases and
pydantic ``BaseModel`` classes of the same domain package) and raises :class:`ToolSourceError` on
anything else rather than guess: a guess would only surface later as a checksum mismatch.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.benchmarks.taubench.data import TauBenchDataError

# A file of the domain package ("tools.py", "data_model.py") -> its source text.
ReadSource = Callable[[str], str]

TOOLKIT_MODULE = "tau2.environment.toolkit"
TOOL_KINDS = {"READ": "read", "WRITE": "write", "THINK": "think", "GENERIC": "generic"}

# Section titles of docstring_parser's Google style; _ENTRY_SECTIONS hold one "name: text" entry per line.
_PARAM_SECTIONS = frozenset({"Arguments", "Args", "Parameters", "Params", "Attributes"})
_ENTRY_SECTIONS = _PARAM_SECTIONS | {"Raises", "Exceptions", "Except"}
_SECTION_TITLE = re.compile(
    r"^(" + "|".join(sorted(_ENTRY_SECTIONS | {"Example", "Examples", "Returns", "Yields"})) + r"):[ \t\r\f\v]*$",
    re.M,
)
_TYPED_NAME = re.compile(r"\s*(.+?)\s*\(\s*(.*[^\s]+)\s*\)")

_SCALARS: dict[str, dict[str, Any]] = {
    "builtins.str": {"type": "string"},
    "builtins.int": {"type": "integer"},
    "builtins.float": {"type": "number"},
    "builtins.bool": {"type": "boolean"},
    "builtins.dict": {"additionalProperties": True, "type": "object"},
}
_LITERAL_TYPES = {str: "string", int: "integer", bool: "boolean"}
_NULL: dict[str, Any] = {"type": "null"}
_REQUIRED = object()  # sentinel default of a required field


class ToolSourceError(TauBenchDataError):
    """The upstream tool sources use a construct this derivation does not reproduce."""


class _NotGoogleStyle(Exception):
    """docstring_parser's Google parser would fail, so upstream falls back to its ReST parser."""


def parse_docstring(name: str, docstring: str | None) -> tuple[str, dict[str, str]]:
    """(tool description, argument descriptions) as upstream's ``Tool.parse_data`` derives them."""
    text = inspect.cleandoc(docstring or "")
    try:
        head, params = _google_sections(text)
    except _NotGoogleStyle:
        # The ReST parser finds no fields in these docstrings: its description runs to the first ":" line.
        field = re.search("^:", text, re.M)
        head, params = (text[: field.start()] if field else text), {}
    short, _, long = head.partition("\n")
    if not short:
        return name, params
    long = long.strip()
    return (f"{short}\n\n{long}" if long else short), params


def _google_sections(text: str) -> tuple[str, dict[str, str]]:
    titles = list(_SECTION_TITLE.finditer(text))
    if not titles:
        return text, {}
    chunks: dict[str, str] = {}
    for title, following in zip(titles, [*titles[1:], None], strict=True):
        body = text[title.end() : following.start() if following else len(text)]
        stray = re.search(r"\n\S", body)  # a line at column 0 that is no title ends the section
        chunks[title.group(1)] = (body[: stray.start()] if stray else body).strip("\n")
    params: dict[str, str] = {}
    for section, chunk in chunks.items():
        if section not in _ENTRY_SECTIONS:
            continue
        indent = chunk[: len(chunk) - len(chunk.lstrip())]
        starts = list(re.finditer("^" + indent + r"(?=\S)", chunk, re.M))
        if not starts:
            raise _NotGoogleStyle
        for start, following in zip(starts, [*starts[1:], None], strict=True):
            entry = chunk[start.end() : following.start() if following else len(chunk)].strip("\n")
            before, colon, description = entry.partition(":")
            if not colon:
                raise _NotGoogleStyle
            if section in _PARAM_SECTIONS:
                typed = _TYPED_NAME.match(before)
                params[typed.group(1) if typed else before] = _entry_description(description)
    return text[: titles[0].start()], params


def _entry_description(text: str) -> str:
    """Continuation lines are dedented among themselves, the first line is kept as written."""
    if text.startswith(" "):
        text = text[1:]
    first, newline, rest = text.partition("\n")
    if newline:
        text = f"{first}\n{inspect.cleandoc(rest)}"
    return text.strip("\n")


@dataclass(frozen=True)
class _Module:
    file: str
    # Top-level classes and ``Name = expression`` aliases.
    definitions: dict[str, ast.ClassDef | ast.expr]
    # Local name -> (absolute module, imported name).
    imports: dict[str, tuple[str, str]]


# What a name refers to: a definition in a domain source, or a dotted symbol ("builtins.str", "typing.List").
_Target = tuple[_Module, ast.ClassDef | ast.expr] | str


class _Sources:
    """The domain package's source files, parsed on first use; names resolved across their imports."""

    def __init__(self, domain: str, read: ReadSource) -> None:
        self._package = f"tau2.domains.{domain}"
        self._read = read
        self._modules: dict[str, _Module] = {}

    def module(self, file: str) -> _Module:
        if file not in self._modules:
            try:
                tree = ast.parse(self._read(file), filename=file)
            except SyntaxError as exc:
                raise ToolSourceError(f"upstream source {file} does not parse: {exc}") from exc
            self._modules[file] = self._index(file, tree)
        return self._modules[file]

    def _index(self, file: str, tree: ast.Module) -> _Module:
        package = ".".join([self._package, *file.removesuffix(".py").split("/")[:-1]])
        definitions: dict[str, ast.ClassDef | ast.expr] = {}
        imports: dict[str, tuple[str, str]] = {}
        for statement in tree.body:
            if isinstance(statement, ast.ClassDef):
                definitions[statement.name] = statement
            elif (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                  and isinstance(target := statement.targets[0], ast.Name)):
                definitions[target.id] = statement.value
            elif isinstance(statement, ast.ImportFrom):
                parts = package.split(".")
                base = parts[: len(parts) + 1 - statement.level] if statement.level else []  # relative import
                source = ".".join([*base, statement.module] if statement.module else base)
                for alias in statement.names:
                    imports[alias.asname or alias.name] = (source, alias.name)
        return _Module(file, definitions, imports)

    def lookup(self, module: _Module, name: str) -> _Target:
        if name in module.definitions:
            return module, module.definitions[name]
        if name not in module.imports:
            return f"builtins.{name}"
        source, imported = module.imports[name]
        if source.startswith(self._package + "."):
            return self.lookup(self.module(source[len(self._package) + 1 :].replace(".", "/") + ".py"), imported)
        return f"{'typing' if source == 'typing_extensions' else source}.{imported}"

    def bases(self, module: _Module, cls: ast.ClassDef) -> list[_Target | None]:
        """What each base class names (None for an expression that is not a plain name)."""
        return [self.lookup(module, base.id) if isinstance(base, ast.Name) else None for base in cls.bases]


@dataclass(frozen=True)
class _Field:
    name: str
    schema: dict[str, Any]
    default: Any  # _REQUIRED when the field has none
    description: str | None


class _ParametersSchema:
    """One tool's ``parameters`` JSON schema; referenced models collect in its ``$defs``."""

    def __init__(self, sources: _Sources) -> None:
        self._sources = sources
        self._defs: dict[str, dict[str, Any]] = {}
        self._models: dict[str, ast.ClassDef] = {}

    def build(self, fields: Sequence[_Field]) -> dict[str, Any]:
        schema = _object_schema("parameters", fields, None)
        if self._defs:
            schema["$defs"] = self._defs
        return _pydantic_key_order(schema)

    def annotation(self, node: ast.expr, module: _Module) -> dict[str, Any]:
        if isinstance(node, ast.Constant) and node.value is None:
            return dict(_NULL)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return _any_of([self.annotation(node.left, module), self.annotation(node.right, module)])
        if isinstance(node, ast.Name):
            target = self._sources.lookup(module, node.id)
            if isinstance(target, str):
                if target in _SCALARS:
                    return dict(_SCALARS[target])
            elif isinstance(target[1], ast.ClassDef):
                return self._model(target[1], target[0])
            else:
                return self.annotation(target[1], target[0])
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            origin = self._sources.lookup(module, node.value.id)
            args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if origin in ("typing.List", "builtins.list") and len(args) == 1:
                return {"items": self.annotation(args[0], module), "type": "array"}
            if origin == "typing.Optional" and len(args) == 1:
                return _any_of([self.annotation(args[0], module), dict(_NULL)])
            if origin == "typing.Union":
                return _any_of([self.annotation(arg, module) for arg in args])
            if origin == "typing.Literal":
                return _literal([_constant(arg, module) for arg in args])
        raise ToolSourceError(
            f"{module.file}:{node.lineno}: no JSON schema rule for the annotation {ast.unparse(node)}")

    def _model(self, model: ast.ClassDef, module: _Module) -> dict[str, Any]:
        ref = {"$ref": f"#/$defs/{model.name}"}
        known = self._models.setdefault(model.name, model)
        if known is not model:
            raise ToolSourceError(f"{module.file}:{model.lineno}: two argument models are named {model.name}")
        if model.name in self._defs:
            return ref
        if self._sources.bases(module, model) != ["pydantic.BaseModel"]:
            raise ToolSourceError(
                f"{module.file}:{model.lineno}: argument model {model.name} must derive from BaseModel only")
        self._defs[model.name] = {}  # reserved first, so a self-reference ends here
        fields = [
            _Field(statement.target.id, self.annotation(statement.annotation, module),
                   *self._field_value(statement.value, module))
            for statement in model.body
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
        ]
        self._defs[model.name] = _object_schema(model.name, fields, ast.get_docstring(model))
        return ref

    def _field_value(self, value: ast.expr | None, module: _Module) -> tuple[Any, str | None]:
        """(default, description) of a model field: ``= Field(default, description=...)`` or ``= default``."""
        if value is None:
            return _REQUIRED, None
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
                and self._sources.lookup(module, value.func.id) == "pydantic.Field"):
            return _constant(value, module), None
        options = {keyword.arg: keyword.value for keyword in value.keywords}
        if value.args:
            options.setdefault("default", value.args[0])
        unknown = set(options) - {"default", "description"}
        if unknown or len(value.args) > 1:
            raise ToolSourceError(f"{module.file}:{value.lineno}: no JSON schema rule for {ast.unparse(value)}")
        default = _constant(options["default"], module) if "default" in options else ...
        description = _constant(options["description"], module) if "description" in options else None
        return (_REQUIRED if default is ... else default), description


def _constant(node: ast.expr, module: _Module) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError as exc:
        raise ToolSourceError(f"{module.file}:{node.lineno}: {ast.unparse(node)} is not a literal") from exc


def _literal(values: list[Any]) -> dict[str, Any]:
    values = list({(type(value), value): value for value in values}.values())  # typing.Literal deduplicates
    schema: dict[str, Any] = {"const": values[0]} if len(values) == 1 else {"enum": values}
    types = {type(value) for value in values}
    if len(types) == 1 and (json_type := _LITERAL_TYPES.get(types.pop())):
        schema["type"] = json_type
    return schema


def _any_of(members: list[dict[str, Any]]) -> dict[str, Any]:
    """pydantic's union: nested unions flattened, duplicates dropped, ``null`` last, one member unwrapped."""
    flat: list[dict[str, Any]] = []
    for member in members:
        for schema in member["anyOf"] if list(member) == ["anyOf"] else [member]:
            if schema not in flat:
                flat.append(schema)
    flat.sort(key=lambda schema: schema == _NULL)
    return flat[0] if len(flat) == 1 else {"anyOf": flat}


def _is_model_reference(schema: dict[str, Any]) -> bool:
    """pydantic gives no field title to a model reference, optional or not."""
    members = [member for member in schema.get("anyOf", [schema]) if member != _NULL]
    return len(members) == 1 and "$ref" in members[0]


def _object_schema(title: str, fields: Sequence[_Field], description: str | None) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for field in fields:
        prop = dict(field.schema)
        if not _is_model_reference(field.schema):
            prop["title"] = field.name.title().replace("_", " ").strip()
        if field.description is not None:
            prop["description"] = field.description
        if field.default is not _REQUIRED:
            prop["default"] = field.default
        properties[field.name] = prop
    schema: dict[str, Any] = {"properties": properties, "title": title, "type": "object"}
    required = [field.name for field in fields if field.default is _REQUIRED]
    if required:
        schema["required"] = required
    if description:
        schema["description"] = description
    return schema


def _pydantic_key_order(value: Any, parent: str | None = None) -> Any:
    """pydantic sorts every schema's keys, except field order under ``properties`` and values under ``default``."""
    if isinstance(value, dict):
        keys = list(value) if parent in ("properties", "default") else sorted(value)
        return {key: _pydantic_key_order(value[key], key) for key in keys}
    if isinstance(value, list):
        return [_pydantic_key_order(item, parent) for item in value]
    return value


def _tool_kind(method: ast.FunctionDef, module: _Module, sources: _Sources) -> str | None:
    """The ``ToolType`` of an ``@is_tool(...)`` method (upstream's default is READ), else None."""
    for decorator in method.decorator_list:
        if not (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Name)
                and sources.lookup(module, decorator.func.id) == f"{TOOLKIT_MODULE}.is_tool"):
            continue
        keywords = {keyword.arg: keyword.value for keyword in decorator.keywords}
        kind = decorator.args[0] if decorator.args else keywords.get("tool_type")
        if kind is None:
            return TOOL_KINDS["READ"]
        if (isinstance(kind, ast.Attribute) and isinstance(kind.value, ast.Name) and kind.attr in TOOL_KINDS
                and sources.lookup(module, kind.value.id) == f"{TOOLKIT_MODULE}.ToolType"):
            return TOOL_KINDS[kind.attr]
        raise ToolSourceError(f"{module.file}:{decorator.lineno}: unknown tool type {ast.unparse(kind)}")
    return None


def _toolkit_tools(module: _Module, sources: _Sources) -> list[tuple[ast.FunctionDef, str]]:
    """(method, kind) of the one toolkit class's tools, in the order its class namespace holds them."""
    toolkits = []
    for definition in module.definitions.values():
        if not isinstance(definition, ast.ClassDef):
            continue
        methods: dict[str, ast.FunctionDef] = {}  # a redefinition keeps the first one's place, like a class dict
        for statement in definition.body:
            if isinstance(statement, ast.FunctionDef):
                methods[statement.name] = statement
        tools = [(method, kind) for method in methods.values() if (kind := _tool_kind(method, module, sources))]
        if tools:
            toolkits.append((definition, tools))
    if len(toolkits) != 1:
        raise ToolSourceError(f"{module.file}: expected one toolkit class with @is_tool methods, found {len(toolkits)}")
    toolkit, tools = toolkits[0]
    if sources.bases(module, toolkit) != [f"{TOOLKIT_MODULE}.ToolKitBase"]:
        raise ToolSourceError(f"{module.file}:{toolkit.lineno}: {toolkit.name} must derive from ToolKitBase only")
    return tools


def _tool_schema(method: ast.FunctionDef, module: _Module, sources: _Sources) -> dict[str, Any]:
    arguments = method.args
    if arguments.vararg or arguments.kwarg:
        raise ToolSourceError(f"{module.file}:{method.lineno}: {method.name} takes *args or **kwargs")
    description, documented = parse_docstring(method.name, ast.get_docstring(method, clean=False))
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(arguments.defaults))
    parameters = zip([*positional, *arguments.kwonlyargs], [*defaults, *arguments.defaults, *arguments.kw_defaults],
                     strict=True)
    schema = _ParametersSchema(sources)
    fields = []
    for argument, default in list(parameters)[1:]:  # the bound method drops self
        if argument.annotation is None:
            raise ToolSourceError(f"{module.file}:{argument.lineno}: {method.name}({argument.arg}) has no annotation")
        fields.append(_Field(
            argument.arg,
            schema.annotation(argument.annotation, module),
            _REQUIRED if default is None else _constant(default, module),
            documented.get(argument.arg),
        ))
    return {
        "type": "function",
        "function": {"name": method.name, "description": description, "parameters": schema.build(fields)},
    }


def derive_tools_json(domain: str, read_source: ReadSource) -> bytes:
    """The bytes of ``<domain>/tools.json`` built from the domain's ``tools.py`` and the modules it imports."""
    sources = _Sources(domain, read_source)
    module = sources.module("tools.py")
    tools = _toolkit_tools(module, sources)
    document = {
        "tools": [_tool_schema(method, module, sources) for method, _ in tools],
        "kinds": {method.name: kind for method, kind in tools},
    }
    return (json.dumps(document, indent=2) + "\n").encode("utf-8")
