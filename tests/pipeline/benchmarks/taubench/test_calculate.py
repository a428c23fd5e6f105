"""The calculate tool (TOOLS.md §4.7): Python arithmetic, float str() after round(x, 2)."""

from __future__ import annotations

import pytest

from .conftest import Session

RESULTS = [
    ("2 + 2", "4.0"),
    ("10 / 3", "3.33"),
    ("-3", "-3.0"),
    ("0.1 + 0.2", "0.3"),
    ("1.005", "1.0"),  # round-half-even on the binary value
    ("2.675", "2.67"),
    ("10 ** 12", "1000000000000.0"),
    ("10 ** 20", "1e+20"),
    ("-0.0", "-0.0"),
    ("7 // 2", "3.0"),
    ("(1 + 2) * 3", "9.0"),
]
ERRORS = [
    ("2 + x", "Invalid characters in expression"),
    ("2 % 3", "Invalid characters in expression"),
    ("1e5", "Invalid characters in expression"),
    ("1 / 0", "division by zero"),
    ("1.0 / 0", "float division by zero"),
    ("1 // 0", "integer division or modulo by zero"),
    ("1 +", "invalid syntax (<string>, line 1)"),
    ("()", "float() argument must be a string or a real number, not 'tuple'"),
]


@pytest.mark.parametrize(("expression", "expected"), RESULTS)
def test_results(airline: Session, expression: str, expected: str) -> None:
    assert airline.call("calculate", {"expression": expression}).content == expected


@pytest.mark.parametrize(("expression", "expected"), ERRORS)
def test_errors(retail: Session, expression: str, expected: str) -> None:
    assert retail.err("calculate", expression=expression) == expected


def test_non_string_expressions(airline: Session) -> None:
    assert airline.err("calculate", expression=5) == "'int' object is not iterable"
    assert airline.err("calculate", expression=None) == "'NoneType' object is not iterable"


def test_astronomic_powers_are_refused_instead_of_hanging(airline: Session) -> None:
    # Documented deviation: upstream evaluates 9**9**9 without a limit and hangs.
    assert airline.err("calculate", expression="9 ** 9 ** 9") == "Expression too large to evaluate"
    assert airline.err("calculate", expression="(1)(9 ** 9 ** 9)") == "Expression too large to evaluate"
    assert airline.call("calculate", {"expression": "2 ** 100000 / 2 ** 99999"}).content == "2.0"
    assert airline.call("calculate", {"expression": "2 ** -2"}).content == "0.25"
