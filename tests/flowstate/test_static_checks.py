"""The method's package as a checker sees it: no import cycles (grimp counts deferred and TYPE_CHECKING
imports too)."""

from __future__ import annotations

import grimp


def _cycles(package: str) -> list[set[str]]:
    """The strongly connected components of more than one module in ``package``'s import graph."""
    graph = grimp.build_graph(package, cache_dir=None)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[set[str]] = []

    def visit(module: str) -> None:  # Tarjan's algorithm
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = {stack.pop()}
            while module not in component:
                component.add(stack.pop())
            if len(component) > 1:
                cycles.append(component)

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return cycles


def test_the_method_package_has_no_import_cycles() -> None:
    assert _cycles("flowstate") == []
