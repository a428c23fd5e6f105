"""The benchmark interface itself: generic in each benchmark's cell model, one registration each."""

from __future__ import annotations

from typing import Any, get_args, get_origin

import grimp
import pytest

from pipeline.benchmarks.base import BENCHMARKS, Benchmark
from pipeline.core.plugins import load_plugins


@pytest.fixture(scope="module")
def benchmarks() -> list[Benchmark[Any]]:
    """The installed benchmarks and the tests' plug-in (tiny), as every process loads them."""
    load_plugins(["tests.plugins.tiny"])
    return [BENCHMARKS.get(name) for name in BENCHMARKS.names()]


def test_each_benchmark_is_generic_in_its_own_cell_model(benchmarks: list[Benchmark[Any]]) -> None:
    """``Benchmark[MyCell]``: its methods take its own cell model, with nothing to silence the checker."""
    assert {b.name for b in benchmarks} >= {"taubench", "memoryarena", "tiny"}
    for benchmark in benchmarks:
        [parameterised] = [base for base in type(benchmark).__orig_bases__ if get_origin(base) is Benchmark]
        assert get_args(parameterised) == (benchmark.cell,), benchmark.name


def test_no_import_cycle_runs_through_the_benchmark_layer() -> None:
    """Deferred and TYPE_CHECKING imports included, as import-linter counts them; a package and its own
    modules too (which its sibling contract does not look at: taubench's __init__, cli and plugin were one)."""
    graph = grimp.build_graph("pipeline", "flowstate", cache_dir=None)
    ours = sorted(m for m in graph.modules if m.startswith("pipeline.benchmarks"))
    cycles = [(m, imported) for m in ours for imported in sorted(graph.find_modules_directly_imported_by(m))
              if graph.chain_exists(importer=imported, imported=m)]
    assert cycles == []
