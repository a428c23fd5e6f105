"""The ``calculate`` tool (TOOLS.md §4.7): Python arithmetic on a restricted character set.

Upstream evaluates the expression with ``eval`` after the character check, so results and error
texts are Python's own (unbounded ints, true division, ``invalid syntax (<string>, line 1)``,
``float division by zero`` …). We do the same: with only digits, ``+-*/().`` and spaces no name
can be formed, so nothing but arithmetic can run. The one deliberate difference: upstream hangs
on an integer power with an astronomically large result (``9**9**9``); we refuse it instead,
because a hung worker would stall a whole sweep.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

ALLOWED_CHARACTERS = "0123456789+-*/(). "
MAX_POWER_BITS = 4_000_000
TOO_LARGE = "Expression too large to evaluate"

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}


class _Unchecked(Exception):
    """The guard cannot say more about this expression; the real evaluation decides."""


def _guarded_value(node: ast.AST) -> Any:
    """Evaluate like Python would, but refuse integer powers beyond MAX_POWER_BITS."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_guarded_value(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _guarded_value(node.left), _guarded_value(node.right)
        if (
            isinstance(node.op, ast.Pow)
            and isinstance(left, int)
            and isinstance(right, int)
            and abs(left) > 1
            and right * left.bit_length() > MAX_POWER_BITS
        ):
            raise ValueError(TOO_LARGE)
        return _BINARY[type(node.op)](left, right)
    for child in ast.iter_child_nodes(node):  # calls, tuples …: still guard what they contain
        try:
            _guarded_value(child)
        except (_Unchecked, ArithmeticError, TypeError):
            pass
    raise _Unchecked


def _refuse_huge_powers(expression: str) -> None:
    try:
        tree = ast.parse(expression, "<string>", mode="eval")
    except (SyntaxError, ValueError, RecursionError):
        return  # eval below raises the same error
    if not any(isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) for node in ast.walk(tree)):
        return
    try:
        _guarded_value(tree.body)
    except ValueError as exc:
        if str(exc) == TOO_LARGE:
            raise
    except (_Unchecked, ArithmeticError, TypeError, RecursionError):
        pass  # not a huge power: eval raises or returns what Python gives


def calculate(expression: Any) -> str:
    if not all(char in ALLOWED_CHARACTERS for char in expression):
        raise ValueError("Invalid characters in expression")
    if isinstance(expression, str):
        _refuse_huge_powers(expression)
    return str(round(float(eval(expression, {"__builtins__": None}, {})), 2))  # noqa: S307
