"""The benchmark interface itself: generic in each benchmark's cell model, one registration each."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any, get_args, get_origin

import pytest

from flowstate import METHODS
from pipeline.benchmarks import base
from pipeline.benchmarks.base import BENCHMARKS, Benchmark
from pipeline.core.plugins import load_plugins
from pipeline.llm.deployments import DEPLOYMENT_KINDS


@pytest.fixture(scope="module")
def benchmarks() -> list[Benchmark[Any]]:
    """The installed benchmarks and the tests' plug-in (tiny), as every process loads them."""
    load_plugins(["examples.tiny", "examples.last_n"])
    return [BENCHMARKS.get(name) for name in BENCHMARKS.names()]


def test_each_benchmark_is_generic_in_its_own_cell_model(benchmarks: list[Benchmark[Any]]) -> None:
    """``Benchmark[MyCell]``: its methods take its own cell model, with nothing to silence the checker."""
    assert {b.name for b in benchmarks} >= {"taubench", "memoryarena", "tiny"}
    for benchmark in benchmarks:
        [parameterised] = [base for base in type(benchmark).__orig_bases__ if get_origin(base) is Benchmark]
        assert get_args(parameterised) == (benchmark.cell,), benchmark.name


@pytest.mark.parametrize("module", ["base.py", "requests.py", "transcript.py"])
def test_generic_benchmark_code_names_no_method_and_no_engine(module: str, benchmarks: list[Benchmark[Any]]) -> None:
    """Strings and names of the code (not its docstrings or imports) in the modules every benchmark
    builds on. ``scripted`` is also the job file's setting for a benchmark's own fixture in a role
    (:data:`pipeline.core.specs.RoleSetting`), which this interface serves: not an engine here."""
    names = (set(METHODS.names()) | set(DEPLOYMENT_KINDS.names())) - {"scripted"}
    tree = ast.parse((Path(base.__file__).parent / module).read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    words = [node.value for node in ast.walk(tree)
             if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]
    words += [node.id for node in ast.walk(tree) if isinstance(node, ast.Name)]
    words += [node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)]
    words += [node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)]
    words += [node.arg for node in ast.walk(tree) if isinstance(node, ast.arg)]
    named = sorted({name for name in names for word in words if re.search(rf"(?<![a-z0-9]){name}(?![a-z0-9])", word)})
    assert named == []
