"""The method's package as a checker sees it: no import cycles (grimp counts deferred and TYPE_CHECKING
imports too), mypy strict (pyproject.toml's [tool.mypy]), and every ``type: ignore`` saying why."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import grimp

from tests.conftest import REPO_ROOT

# ``# type: ignore[code]`` followed by a comment that says something beyond a noqa directive.
_EXPLAINED_IGNORE = re.compile(r"# type: ignore\[[a-z-]+(, [a-z-]+)*\]\s+#\s*(noqa: [A-Z0-9, ]+-\s*)?(?!noqa\b)\w")


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


def test_the_method_package_passes_mypy_strict(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "mypy", "flowstate", "--cache-dir", str(tmp_path)],
                            cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_type_ignore_in_the_method_package_says_why() -> None:
    unexplained = [f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}"
                   for path in sorted((REPO_ROOT / "flowstate").rglob("*.py"))
                   for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                   if "type: ignore" in line and not _EXPLAINED_IGNORE.search(line)]
    assert unexplained == []
