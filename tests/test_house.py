"""Rules of the house that no linter states for us.

- Every silenced type check names its error code and says why on its line; none silences an override
  (a benchmark's methods take its own cell model: ``Benchmark[MyCell]``).
- No import cycle anywhere in the two packages, counted on grimp's graph as import-linter builds it
  (deferred and ``TYPE_CHECKING`` imports included) and, unlike its sibling contract, between a package's
  ``__init__`` and its own modules too.

(The layers themselves are import-linter's and the types mypy's: both run in the README's test command.)
"""

from __future__ import annotations

import re
import tokenize
from pathlib import Path

import grimp

from tests.conftest import REPO_ROOT

_IGNORE = "type: " + "ignore"  # spelled apart, so that this file holds no such comment itself
# The comment goes on after the code in brackets with a reason (beyond a noqa directive).
_EXPLAINED = re.compile(re.escape(_IGNORE) + r"\[[a-z-]+(, [a-z-]+)*\]\s+#\s*(noqa: [A-Z0-9, ]+-\s*)?(?!noqa\b)\w")
_CHECKED = ("flowstate", "pipeline", "examples", "tests", "perf")


def _ignore_comments() -> list[tuple[str, str]]:
    """Every comment that silences the type checker: (file:line, the comment)."""
    found = []
    for folder in _CHECKED:
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            with path.open("rb") as source:
                for token in tokenize.tokenize(source.readline):
                    if token.type == tokenize.COMMENT and _IGNORE in token.string:
                        found.append((f"{path.relative_to(REPO_ROOT)}:{token.start[0]}", token.string))
    return found


def test_every_silenced_type_check_names_its_code_and_says_why_and_none_is_an_override() -> None:
    comments = _ignore_comments()
    assert [where for where, comment in comments if not _EXPLAINED.search(comment)] == []
    assert [where for where, comment in comments if "[override" in comment or ", override" in comment] == []


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = [stack.pop()]
            while component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return cycles


def test_no_import_cycle_in_either_package() -> None:
    assert _cycles(grimp.build_graph("flowstate", "pipeline", cache_dir=None)) == []


def test_the_cycle_count_sees_a_cycle_through_a_package_and_its_own_module(tmp_path: Path, monkeypatch) -> None:
    package = tmp_path / "cyclic"
    package.mkdir()
    (package / "__init__.py").write_text("from cyclic.cli import main\n\nVERSION = 1\n")
    (package / "cli.py").write_text("def main():\n    from cyclic import VERSION  # deferred: counted all the same\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _cycles(grimp.build_graph("cyclic", cache_dir=None)) == [["cyclic", "cyclic.cli"]]
