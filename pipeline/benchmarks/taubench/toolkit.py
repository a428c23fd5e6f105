"""Executing a tool call the way upstream's environment does (TOOLS.md §2).

Tools are plain methods of a class named ``AirlineTools`` / ``RetailTools`` called with the
model's arguments as keyword arguments, so argument errors are Python's own messages
(``AirlineTools.get_user_details() got an unexpected keyword argument 'foo'``) and any exception
a tool raises becomes ``Error: <str(exception)>``. Results are rendered once, right after the
call, with ``json.dumps`` defaults (records are stored in canonical field order).
"""

from __future__ import annotations

import json
import types
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from flowstate.environment import ToolCall, ToolResult
from pipeline.benchmarks.taubench.calculator import calculate
from pipeline.benchmarks.taubench.database import EpisodeDB, Record, copy_json

# Upstream's dispatcher is ``Environment.make_tool_call(self, tool_name, requestor, **kwargs)``,
# called as ``make_tool_call(name, requestor=..., **arguments)``: these names collide with it.
_DISPATCHER = "Environment.make_tool_call"
_DISPATCHER_QUALIFIED = "tau2.environment.environment.Environment.make_tool_call"

F = TypeVar("F", bound=Callable[..., Any])
# The attribute that marks a method as a tool.
TOOL_MARK = "__tau_tool__"


def tool(method: F) -> F:
    """Mark a method as a tool the agent may call."""
    setattr(method, TOOL_MARK, True)
    return method


def _owned_copy(function: Callable[..., Any], owner: type) -> Callable[..., Any]:
    """A copy of an inherited tool whose qualname names ``owner``, as Python's argument errors
    quote it (``RetailTools.calculate() missing 1 required positional argument …``)."""
    copy = types.FunctionType(
        function.__code__, function.__globals__, function.__name__, function.__defaults__, function.__closure__
    )
    copy.__qualname__ = f"{owner.__name__}.{function.__name__}"
    setattr(copy, TOOL_MARK, True)
    return copy


def table(name: str) -> Any:
    """A tool-class attribute giving the episode's table ``name``."""
    return property(lambda self: self.db[name], doc=f"The episode's {name} (copy-on-write).")


def _dispatch_error(arguments: Any) -> str | None:
    """The error upstream's dispatcher raises before any tool is looked up, if any."""
    if not isinstance(arguments, dict):
        # ``**arguments`` on a non-mapping (upstream's ToolCall model would not even accept it).
        return f"{_DISPATCHER_QUALIFIED}() argument after ** must be a mapping, not {type(arguments).__name__}"
    if "requestor" in arguments:
        return f"{_DISPATCHER_QUALIFIED}() got multiple values for keyword argument 'requestor'"
    for name in arguments:
        if name in ("self", "tool_name"):
            return f"{_DISPATCHER}() got multiple values for argument '{name}'"
    return None


class ToolKit:
    """Base of the domain tool classes: the generic tools both domains share, and dispatch."""

    tool_names: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, db: EpisodeDB) -> None:
        self.db = db

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        names = {name for name in dir(cls) if getattr(getattr(cls, name), TOOL_MARK, False)}
        for name in names - set(vars(cls)):
            setattr(cls, name, _owned_copy(getattr(cls, name), cls))
        cls.tool_names = frozenset(names)

    def _lookup(self, collection: str, key: Any, not_found: str) -> Record:
        """The record under ``key`` (compared as given: unhashable keys raise TypeError)."""
        records = self.db[collection]
        if key not in records:
            raise ValueError(not_found)
        return records[key]

    def execute(self, call: ToolCall) -> ToolResult:
        """Run one call against the live DB; never raises for anything the model sends."""
        problem = _dispatch_error(call.arguments)
        if problem is None and call.name not in self.tool_names:
            problem = f"Tool '{call.name}' not found."
        if problem is not None:
            return ToolResult(content=f"Error: {problem}", error=True)
        try:
            # A private copy: raw argument values may end up stored in the DB.
            result = getattr(self, call.name)(**copy_json(call.arguments))
        except Exception as exc:  # every tool failure is a result the agent sees
            return ToolResult(content=f"Error: {exc}", error=True)
        return ToolResult(content=result if isinstance(result, str) else json.dumps(result))

    @tool
    def calculate(self, expression: Any) -> str:
        return calculate(expression)

    @tool
    def transfer_to_human_agents(self, summary: Any) -> str:
        return "Transfer successful"
