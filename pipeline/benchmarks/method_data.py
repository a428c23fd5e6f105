"""``flowstate data fetch methods``: the released prompts every registered method declares
(:class:`flowstate.data.PromptRelease`), fetched from their public repositories at the pinned commit.

Each prompt is a string literal of a repository's Python file: downloaded, taken out with ``ast``
(module-level prompts are the values of their assignments; f-string bodies inside methods are kept as
written, placeholders unevaluated), checked against its SHA-256 and written to
``<data dir>/methods/<method>/``, never into the repository. Nothing is written unless every file of
a release checks out.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
from pathlib import Path

from flowstate import METHODS
from flowstate.data import PromptRelease
from pipeline.core.atomic import write_bytes_atomic
from pipeline.core.cli_hooks import CliHooks
from pipeline.core.data import BenchmarkDataError, download

RAW_GITHUB = "https://raw.githubusercontent.com"


class MethodFetchError(BenchmarkDataError):
    pass


def releases() -> list[PromptRelease]:
    """The registered methods' releases, each once (methods may share one), by folder."""
    found = {plugin.release.method: plugin.release for name in METHODS.names()
             if (plugin := METHODS.get(name)).release is not None}
    return [found[method] for method in sorted(found)]


def fetch_release(release: PromptRelease, data_dir: Path, base_url: str | None = None) -> str:
    """Download into ``<data_dir>/methods/<method>/``; ``base_url`` replaces raw.githubusercontent.com."""
    base = f"{(base_url or RAW_GITHUB).rstrip('/')}/{release.repo}/{release.commit}"
    where = f"{release.repo}@{release.commit[:7]}"
    sources = {path: download(f"{base}/{path}", timeout=60, error=MethodFetchError).decode("utf-8")
               for path in dict.fromkeys(lit.source for lit in release.literals)}
    files: dict[str, bytes] = {}
    for lit in release.literals:
        data = extract(sources[lit.source], lit.name, f"{where}:{lit.source}").encode("utf-8")
        if hashlib.sha256(data).hexdigest() != lit.sha256:
            raise MethodFetchError(f"{lit.source}: {lit.name} is not the pinned prompt (SHA-256 differs); nothing written")
        files[lit.out] = data
    licence = download(f"{base}/{release.licence}", timeout=60, error=MethodFetchError)
    digest = hashlib.sha256(licence).hexdigest()
    if release.licence_sha256 is not None and digest != release.licence_sha256:
        raise MethodFetchError(f"{release.licence} is not the pinned one (SHA-256 differs); nothing written")
    files["LICENSE"] = licence
    folder = Path(data_dir) / "methods" / release.method
    for out, data in files.items():  # only once everything checked out
        write_bytes_atomic(folder / out, data)
    checked = "" if release.licence_sha256 else f" (licence SHA-256 {digest[:12]}…, not pinned)"
    return f"{len(release.literals)} prompts and the licence of {where} in {folder}{checked}"


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


def _fetch(args: argparse.Namespace) -> int:
    for release in releases():
        print(f"{release.method}: {fetch_release(release, args.data_dir, args.base_url)}")
    return 0


def add_commands(cli: CliHooks) -> None:
    parser = cli.add_fetch("methods", help="the released prompts methods read (those of every registered method that "
                                           "declares some), checksums verified")
    parser.add_argument("--base-url", default=None,
                        help="a mirror laid out as raw.githubusercontent.com (owner/repo/commit/path), for tests")
    parser.set_defaults(handler=_fetch)
