"""Rules of the house that no linter states: every ``# type: ignore`` names its error code and says why.

(The layers and import cycles are import-linter's, the types mypy's: both run in the README's test
command, configured in pyproject.toml.)"""

from __future__ import annotations

import re

from tests.conftest import REPO_ROOT

# ``# type: ignore[code]`` followed by a comment that says something beyond a noqa directive.
_EXPLAINED_IGNORE = re.compile(r"# type: ignore\[[a-z-]+(, [a-z-]+)*\]\s+#\s*(noqa: [A-Z0-9, ]+-\s*)?(?!noqa\b)\w")
_CHECKED = ("flowstate", "pipeline", "examples", "tests", "perf")


def test_every_type_ignore_names_its_code_and_says_why() -> None:
    unexplained = [f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}"
                   for folder in _CHECKED for path in sorted((REPO_ROOT / folder).rglob("*.py"))
                   for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                   if "type: ignore" in line and not _EXPLAINED_IGNORE.search(line)]
    assert unexplained == []
