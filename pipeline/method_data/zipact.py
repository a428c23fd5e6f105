"""ZipAct's released prompts (MIT): the string literals of its source files at a pinned commit,
taken out with ``ast`` and written as text files, each checked against its SHA-256.

Module-level prompts are the values of their assignments; the two user templates are f-string
bodies inside ``ZipActAgent`` methods, kept as written (placeholders unevaluated).
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from pathlib import Path

from pipeline.atomic import write_bytes_atomic
from pipeline.data import BenchmarkDataError, download
from pipeline.method_data import FETCHERS

REPO = "Thomas-mci-21/ZipAct"
COMMIT = "8d57023d48e3b5f8ddf7a77892a22a3ad02e8e9d"
BASE_URL = f"https://raw.githubusercontent.com/{REPO}/{COMMIT}"
LICENSE_SHA256 = "e0e9ce74e04b40902c83ef688b0946d0bb99eafcf2bc4487cdfd3e882fa61a78"


@dataclass(frozen=True)
class Literal:
    out: str  # file name under methods/zipact/
    source: str  # path in the repository
    name: str  # a module-level variable, or Class.method.variable for an f-string in a method
    sha256: str


_PROMPTS = "src/prompts/zipact_prompts.py"
_SCI = "src/prompts/sciworld_prompts.py"
_WEB = "src/prompts/webshop_prompts.py"
_AGENT = "src/agents/zipact.py"
LITERALS = (
    Literal("alfworld_init_state.txt", _PROMPTS, "ALFWORLD_ZIPACT_INIT_STATE_PROMPT",
            "134aff4e663f87e7df256ee12899b9f45397687308191f0efd73e9359147d513"),
    Literal("alfworld_updater_system.txt", _PROMPTS, "ALFWORLD_ZIPACT_UPDATER_SYSTEM_PROMPT",
            "af71771e04fb75f6115d52e73e18d39d6f874dd2fc0cc8e11571b0edb492ce6f"),
    Literal("alfworld_actor_system.txt", _PROMPTS, "ALFWORLD_ZIPACT_ACTOR_SYSTEM_PROMPT",
            "8e9b91feebcf4d9b6a439e84c3278c36110edf538f8bef9be7d41e08025f3d00"),
    Literal("sciworld_init_state.txt", _SCI, "SCIWORLD_ZIPACT_INIT_STATE_PROMPT",
            "5f5ec23735f90e8923675f00401fcd50350ede310ef44b0a87d41401042b594c"),
    Literal("sciworld_updater_system.txt", _SCI, "SCIWORLD_ZIPACT_UPDATER_SYSTEM_PROMPT",
            "8746eee11f0dd1c64858973824e1a10dcbfde1abff6dee24af3d13821316a0d9"),
    Literal("sciworld_actor_system.txt", _SCI, "SCIWORLD_ZIPACT_ACTOR_SYSTEM_PROMPT",
            "1b82d370d477edc14d5bfa48b344de06fdf11b092a5361fd3087f3dcf1df6b9c"),
    Literal("webshop_init_state.txt", _WEB, "WEBSHOP_ZIPACT_INIT_STATE_PROMPT",
            "f8cd85dae7ec86e8a7f98f2e704cee39c3bc9ee6cb7ebe3607842b163e0df0cc"),
    Literal("webshop_updater_system.txt", _WEB, "WEBSHOP_ZIPACT_UPDATER_SYSTEM_PROMPT",
            "a43e05196ee73c232c41949c42497134ae7fb178f0fcbf1b733616b784113ddd"),
    Literal("webshop_actor_system.txt", _WEB, "WEBSHOP_ZIPACT_ACTOR_SYSTEM_PROMPT",
            "db8c46939069632f6602e94cafda668102ab2d9879d0aa7845890a33c7872a66"),
    Literal("agent_updater_user_template.txt", _AGENT, "ZipActAgent._update_state.prompt",
            "d99bd0563bbe8733949a3951b3d2e8016196f882f6045cb31570125ff8402856"),
    Literal("agent_actor_user_template.txt", _AGENT, "ZipActAgent._act.prompt",
            "7722acfba750a9403647f6e8d9f9d85e49e5f51ab3fb65403342e05bfa1e4a5d"),
)


class ZipActFetchError(BenchmarkDataError):
    pass


def extract(source: str, name: str, where: str) -> str:
    """The text of one literal of a Python source (see the module docstring)."""
    tree = ast.parse(source)
    *scope, variable = name.split(".")
    body: list[ast.stmt] = tree.body
    for part in scope:  # Class, then method
        node = next((n for n in body if isinstance(n, ast.ClassDef | ast.FunctionDef) and n.name == part), None)
        if node is None:
            raise ZipActFetchError(f"{where}: no {part!r} (looking for {name})")
        body = node.body
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
    raise ZipActFetchError(f"{where}: no string assigned to {name}")


def fetch_zipact(data_dir: Path, base_url: str | None = None) -> str:
    base = (base_url or BASE_URL).rstrip("/")
    folder = Path(data_dir) / "methods" / "zipact"
    sources = {path: download(f"{base}/{path}", timeout=60, error=ZipActFetchError).decode("utf-8")
               for path in dict.fromkeys(lit.source for lit in LITERALS)}
    files: dict[str, bytes] = {}
    for lit in LITERALS:
        data = extract(sources[lit.source], lit.name, f"{REPO}@{COMMIT[:7]}:{lit.source}").encode("utf-8")
        if hashlib.sha256(data).hexdigest() != lit.sha256:
            raise ZipActFetchError(f"{lit.source}: {lit.name} is not the pinned prompt (SHA-256 differs); nothing written")
        files[lit.out] = data
    licence = download(f"{base}/LICENSE", timeout=60, error=ZipActFetchError)
    if hashlib.sha256(licence).hexdigest() != LICENSE_SHA256:
        raise ZipActFetchError("LICENSE is not the pinned one (SHA-256 differs); nothing written")
    files["LICENSE"] = licence
    for out, data in files.items():  # only once everything checked out
        write_bytes_atomic(folder / out, data)
    return f"{len(LITERALS)} prompts and the licence of {REPO}@{COMMIT[:7]} in {folder}"


FETCHERS["zipact"] = fetch_zipact
