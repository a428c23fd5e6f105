"""Model text <-> (state_focus, state_delta, tool_calls, assistant_message) (appendix B.3), and the
State Tracking protocol's ``execution_state`` (one JSON object the model rewrites each step).

Two modes: ``tagged`` (one ``<block>JSON</block>`` section per block) and ``json`` (one JSON object
with the same fields, whose schema a server can enforce). Models wrap, fence and break things, so
parsing never raises: every problem becomes a recorded error or warning on :class:`ParsedOutput`.
"""

from __future__ import annotations

import json
import re
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict

from flowstate.state import STATE_TYPE_SPELLINGS, RelationType
from flowstate.tools import ToolCall


class ProtocolMode(str, Enum):
    TAGGED = "tagged"
    JSON = "json"


# FlowState's two blocks (ISU, PSA), then State Tracking's object; a method's protocol has those it uses.
FLOWSTATE_BLOCKS = ("state_focus", "state_delta")
EXECUTION_STATE = "execution_state"
STATE_BLOCKS = (*FLOWSTATE_BLOCKS, EXECUTION_STATE)
ACTION_BLOCKS = ("tool_calls", "assistant_message")
ALL_BLOCKS = STATE_BLOCKS + ACTION_BLOCKS


class ParsedOutput(BaseModel):
    """One model output, split into its parts. Items of the state blocks stay raw (the rules
    validate them one by one, so one malformed op does not discard the others)."""

    model_config = ConfigDict(extra="forbid")

    state_focus: list[Any] = []
    state_delta: list[Any] = []
    execution_state: dict[str, Any] | None = None
    tool_calls: list[ToolCall] = []
    assistant_message: str | None = None
    errors: list[str] = []
    warnings: list[str] = []

    @property
    def usable(self) -> bool:
        """Algorithm 1 requires y ≠ (∅, ∅, ∅): at least one part must carry something."""
        return bool(self.state_focus or self.state_delta or self.execution_state is not None or self.tool_calls
                    or self.assistant_message)

    def keep_state_blocks(self, blocks: tuple[str, ...]) -> ParsedOutput:
        """For methods whose protocol lacks some state blocks: drop those, noting it if present."""
        dropped = [name for name in STATE_BLOCKS if name not in blocks and getattr(self, name) not in (None, [])]
        if not dropped:
            return self
        what = "state blocks are" if not blocks else f"{' and '.join(dropped)} {'is' if len(dropped) == 1 else 'are'}"
        return self.model_copy(
            update={
                **{name: None if name == EXECUTION_STATE else [] for name in dropped},
                "warnings": [*self.warnings, f"{what} not part of this method's protocol; ignored"],
            }
        )


def parse_output(text: str, mode: ProtocolMode = ProtocolMode.TAGGED) -> ParsedOutput:
    """Parse model text in ``mode``; if that finds nothing, try the other mode and warn."""
    first, second = (_parse_tagged, _parse_json) if mode is ProtocolMode.TAGGED else (_parse_json, _parse_tagged)
    parsed = first(text)
    if parsed.usable or not text.strip():
        return parsed
    fallback = second(text)
    if fallback.usable:
        fallback.warnings.insert(0, f"output was not in {mode.value} mode; parsed it as the other mode")
        return fallback
    return parsed


# -- tagged mode -------------------------------------------------------------------------------
_OPEN = {name: re.compile(rf"<\s*{name}\s*>", re.IGNORECASE) for name in ALL_BLOCKS}
_ANY_TAG = re.compile(r"<\s*/?\s*(" + "|".join(ALL_BLOCKS) + r")\s*>", re.IGNORECASE)


def _parse_tagged(text: str) -> ParsedOutput:
    out = ParsedOutput()
    found = False
    for name in ALL_BLOCKS:
        body = _block_body(text, name)
        if body is None:
            continue
        found = True
        _fill(out, name, body)
    if not found:
        out.errors.append("no protocol blocks found" if text.strip() else "empty output")
    return out


def _block_body(text: str, name: str) -> str | None:
    """Text between ``<name>`` and ``</name>``; a missing close tag ends at the next block tag."""
    opening = _OPEN[name].search(text)
    if opening is None:
        return None
    rest = text[opening.end():]
    closing = re.search(rf"<\s*/\s*{name}\s*>", rest, re.IGNORECASE)
    if closing is not None:
        return rest[: closing.start()]
    nxt = _ANY_TAG.search(rest)
    return rest[: nxt.start()] if nxt else rest


def _fill(out: ParsedOutput, name: str, body: str) -> None:
    stripped = _strip_fences(body)
    if name == "assistant_message":
        out.assistant_message = _message_from_text(stripped, out)
        return
    if not stripped:
        return
    value, error = _loads_lenient(stripped)
    if error is not None:
        out.errors.append(f"{name}: {error}")
        return
    _assign(out, name, value)


def _message_from_text(text: str, out: ParsedOutput) -> str | None:
    """The block should hold ``{"content": ...}``; plain prose there is kept as the message."""
    if not text:
        return None
    for candidate in (text, _TRAILING_COMMA.sub(r"\1", text)):
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict | str) or value is None:
            return _message_from_value(value, out)
    out.warnings.append("assistant_message: not JSON; used the block's text as the message")
    return text


def _message_from_value(value: Any, out: ParsedOutput) -> str | None:
    if isinstance(value, dict):
        if "content" not in value:
            out.errors.append("assistant_message: object has no 'content' field")
            return None
        value = value["content"]
    if value is None:
        return None
    if not isinstance(value, str):
        out.warnings.append("assistant_message: content is not a string; converted it")
        value = json.dumps(value, ensure_ascii=False)
    return value if value.strip() else None


# -- JSON mode ---------------------------------------------------------------------------------
def _parse_json(text: str) -> ParsedOutput:
    out = ParsedOutput()
    stripped = _strip_fences(text)
    if not stripped:
        out.errors.append("empty output")
        return out
    value, error = _loads_lenient(stripped)
    if error is not None:
        out.errors.append(f"output: {error}")
        return out
    if not isinstance(value, dict):
        out.errors.append(f"output: expected a JSON object, got {type(value).__name__}")
        return out
    unknown = sorted(set(value) - set(ALL_BLOCKS))
    if unknown:
        out.warnings.append(f"output: ignored unknown fields {unknown}")
    for name in ALL_BLOCKS:
        if name not in value:
            continue
        if name == "assistant_message":
            out.assistant_message = _message_from_value(value[name], out)
        else:
            _assign(out, name, value[name])
    return out


# -- shared normalisation ----------------------------------------------------------------------
def _assign(out: ParsedOutput, name: str, value: Any) -> None:
    if name == EXECUTION_STATE:
        if isinstance(value, dict):
            out.execution_state = value
        else:
            out.errors.append(f"{name}: expected a JSON object, got {type(value).__name__}")
        return
    items = _as_list(name, value, out)
    if name == "tool_calls":
        out.tool_calls = [call for item in items if (call := _tool_call(item, out)) is not None]
    else:
        setattr(out, name, items)


def _as_list(name: str, value: Any, out: ParsedOutput) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        out.warnings.append(f"{name}: expected a list, got one object; wrapped it")
        return [value]
    out.errors.append(f"{name}: expected a list, got {type(value).__name__}")
    return []


def _tool_call(item: Any, out: ParsedOutput) -> ToolCall | None:
    if not isinstance(item, dict):
        out.errors.append(f"tool_calls: expected an object per call, got {type(item).__name__}")
        return None
    if isinstance(item.get("function"), dict):  # OpenAI's {"type": "function", "function": {...}}
        item = item["function"]
    name = item.get("name")
    if not isinstance(name, str) or not name.strip():
        out.errors.append("tool_calls: a call has no tool name")
        return None
    arguments = item.get("arguments", {})  # absent: a call without arguments
    if isinstance(arguments, str):
        decoded, error = _loads_lenient(arguments) if arguments.strip() else ({}, None)
        if error is not None:
            out.errors.append(f"tool_calls: malformed arguments for {name!r}: {error}")
            return None
        arguments = decoded
    if not isinstance(arguments, dict):  # null, a number, a string of one, a list: never run as {}
        out.errors.append(f"tool_calls: the arguments of {name!r} are {_json_kind(arguments)}, not an object; "
                          "the call was not run")
        return None
    return ToolCall(name=name, arguments=arguments)


def _json_kind(value: Any) -> str:
    names = {type(None): "null", bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list"}
    return names.get(type(value), type(value).__name__)


_FENCE = re.compile(r"^\s*```[\w-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([\]}])")


def _strip_fences(text: str) -> str:
    text = text.strip()
    match = _FENCE.match(text)
    return match.group(1).strip() if match else text


def _loads_lenient(text: str) -> tuple[Any, str | None]:
    """JSON with the repairs models most often need: surrounding prose, trailing commas."""
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        first_error = f"invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    candidates = [text, _TRAILING_COMMA.sub(r"\1", text)]
    for candidate in candidates:
        start = min((i for i in (candidate.find("["), candidate.find("{")) if i >= 0), default=-1)
        if start < 0:
            continue
        try:
            value, _ = json.JSONDecoder().raw_decode(candidate[start:])
            return value, None
        except json.JSONDecodeError:
            continue
    return None, first_error


# -- JSON schema for server-side enforcement -------------------------------------------------
def protocol_schema(*, state_blocks: tuple[str, ...] = FLOWSTATE_BLOCKS, tool_names: list[str] | None = None) -> dict[str, Any]:
    """The JSON-mode output as a JSON schema (fields in protocol order): the method's state blocks
    (FlowState: both), then the action blocks.

    ``tool_names`` restricts tool names to the environment's tools when given.
    """
    name_schema: dict[str, Any] = {"type": "string"}
    if tool_names:
        name_schema = {"type": "string", "enum": list(tool_names)}
    properties: dict[str, Any] = {}
    if "state_focus" in state_blocks:
        properties["state_focus"] = {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"target_id": {"type": "string"}, "reason": {"type": "string"}},
                "required": ["target_id", "reason"],
            },
        }
    if "state_delta" in state_blocks:
        properties["state_delta"] = {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "state_set": {"type": "string", "enum": list(STATE_TYPE_SPELLINGS)},
                    "operation": {"type": "string", "enum": ["add", "update", "remove"]},
                    "state_id": {"type": "string"},
                    "summary": {"type": "string"},
                    "value": {"type": "object"},
                    "refs": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "rel": {"type": "string", "enum": [r.value for r in RelationType]},
                                "state_id": {"type": "string"},
                            },
                            "required": ["rel", "state_id"],
                        },
                    },
                },
                "required": ["operation", "state_id"],
            },
        }
    if EXECUTION_STATE in state_blocks:
        properties[EXECUTION_STATE] = {"type": "object"}
    properties["tool_calls"] = {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {"name": name_schema, "arguments": {"type": "object"}},
            "required": ["name", "arguments"],
        },
    }
    properties["assistant_message"] = {
        "type": "object",
        "properties": {"content": {"type": ["string", "null"]}},
        "required": ["content"],
    }
    return {"type": "object", "properties": properties, "required": list(properties)}


def render_output(mode: ProtocolMode, *, state_blocks: tuple[str, ...] = FLOWSTATE_BLOCKS, focus: list[Any] | None = None,
                  delta: list[Any] | None = None, execution_state: dict[str, Any] | None = None,
                  calls: list[Any] | None = None, message: str | None = None) -> str:
    """A well-formed output in ``mode`` with the given state blocks (what a scripted test policy writes)."""
    state = {"state_focus": focus or [], "state_delta": delta or [], EXECUTION_STATE: execution_state or {}}
    parts: dict[str, Any] = {block: state[block] for block in STATE_BLOCKS if block in state_blocks}
    parts["tool_calls"] = calls or []
    parts["assistant_message"] = {"content": message}
    if mode is ProtocolMode.JSON:
        return json.dumps(parts)
    return "\n".join(f"<{name}>\n{json.dumps(value)}\n</{name}>" for name, value in parts.items())
