"""Released prompts that are string literals of a public repository's Python files, at a pinned
commit: downloaded, taken out with ``ast``, checked against their SHA-256 and written as text files.

Module-level prompts are the values of their assignments; f-string bodies inside methods are kept
as written (placeholders unevaluated). Nothing is written unless every file checks out.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from pathlib import Path

from pipeline.core.atomic import write_bytes_atomic
from pipeline.core.data import BenchmarkDataError, download

RAW_GITHUB = "https://raw.githubusercontent.com"


class MethodFetchError(BenchmarkDataError):
    pass


@dataclass(frozen=True)
class Literal:
    out: str  # file name under methods/<method>/
    source: str  # path in the repository
    name: str  # a module-level variable, or Class.method.variable for an f-string in a method
    sha256: str


@dataclass(frozen=True)
class ReleasedPrompts:
    method: str  # the folder under methods/
    repo: str  # owner/name on GitHub
    commit: str
    literals: tuple[Literal, ...]
    licence: str = "LICENSE"  # its path in the repository
    # The licence's pinned SHA-256; None where the copy in the data directory was never compared
    # with the repository's own (then the fetched licence is written and its hash reported).
    licence_sha256: str | None = None

    def fetch(self, data_dir: Path, base_url: str | None = None) -> str:
        """Download into ``<data_dir>/methods/<method>/``; ``base_url`` replaces raw.githubusercontent.com."""
        base = f"{(base_url or RAW_GITHUB).rstrip('/')}/{self.repo}/{self.commit}"
        where = f"{self.repo}@{self.commit[:7]}"
        sources = {path: download(f"{base}/{path}", timeout=60, error=MethodFetchError).decode("utf-8")
                   for path in dict.fromkeys(lit.source for lit in self.literals)}
        files: dict[str, bytes] = {}
        for lit in self.literals:
            data = extract(sources[lit.source], lit.name, f"{where}:{lit.source}").encode("utf-8")
            if hashlib.sha256(data).hexdigest() != lit.sha256:
                raise MethodFetchError(f"{lit.source}: {lit.name} is not the pinned prompt (SHA-256 differs); nothing written")
            files[lit.out] = data
        licence = download(f"{base}/{self.licence}", timeout=60, error=MethodFetchError)
        digest = hashlib.sha256(licence).hexdigest()
        if self.licence_sha256 is not None and digest != self.licence_sha256:
            raise MethodFetchError(f"{self.licence} is not the pinned one (SHA-256 differs); nothing written")
        files["LICENSE"] = licence
        folder = Path(data_dir) / "methods" / self.method
        for out, data in files.items():  # only once everything checked out
            write_bytes_atomic(folder / out, data)
        checked = "" if self.licence_sha256 else f" (licence SHA-256 {digest[:12]}…, not pinned)"
        return f"{len(self.literals)} prompts and the licence of {where} in {folder}{checked}"


def extract(source: str, name: str, where: str) -> str:
    """The text of one literal of a Python source (see the module docstring)."""
    tree = ast.parse(source)
    *scope, variable = name.split(".")
    body: list[ast.stmt] = tree.body
    for part in scope:  # Class, then method
        found = next((n for n in body if isinstance(n, ast.ClassDef | ast.FunctionDef) and n.name == part), None)
        if found is None:
            raise MethodFetchError(f"{where}: no {part!r} (looking for {name})")
        body = found.body
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == variable for t in node.targets):
            value = node.value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                return value.value
            if isinstance(value, ast.JoinedStr):
                segment = ast.get_source_segment(source, value) or ""
                for quote in ('f"""', "f'''", 'f"', "f'"):
                    if segment.startswith(quote):
                        return segment[len(quote):-(len(quote) - 1)]
    raise MethodFetchError(f"{where}: no string assigned to {name}")
