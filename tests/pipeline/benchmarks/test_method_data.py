"""`flowstate data fetch methods` against a local HTTP mirror laid out as the source repository: the
mirror's Python files are made here from the released prompts of the data directory, so extracting
their literals must give back exactly the pinned files."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from functools import partial
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from flowstate.data import PromptRelease
from flowstate.methods.reasoningbank_release import RELEASE as REASONINGBANK
from flowstate.methods.zipact.release import RELEASE as ZIPACT
from pipeline.benchmarks.method_data import MethodFetchError, extract, fetch_release, releases
from pipeline.cli.main import main
from tests.conftest import DATA_DIR
from tests.pipeline.benchmarks.taubench.test_fetch import QuietHandler

RELEASES = (ZIPACT, REASONINGBANK)


def _released(release: PromptRelease) -> Path:
    return DATA_DIR / "methods" / release.method


def _sources(release: PromptRelease) -> dict[str, str]:
    """Python files holding the released literals the way upstream's do (constants, f-strings in methods)."""
    files: dict[str, list[str]] = {}
    methods: dict[str, list[str]] = {}
    for lit in release.literals:
        text = (_released(release) / lit.out).read_text(encoding="utf-8")
        if "." in lit.name:
            _, method, variable = lit.name.split(".")
            methods.setdefault(lit.source, []).append(
                f"    def {method}(self, observation):\n        state_str = ''\n        {variable} = f\"\"\"{text}\"\"\"\n"
                f"        return {variable}\n")
        else:
            files.setdefault(lit.source, []).append(f"{lit.name} = {text!r}\n")
    for source, defs in methods.items():
        files.setdefault(source, []).append("class ZipActAgent:\n    last_action = None\n\n" + "\n".join(defs))
    return {source: '"""A mirror."""\n\n' + "\n".join(parts) for source, parts in files.items()}


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[str]:
    """raw.githubusercontent.com's layout: owner/repo/commit/path."""
    root = tmp_path / "mirror"
    for release in RELEASES:
        tree = root / release.repo / release.commit
        for source, text in _sources(release).items():
            (tree / source).parent.mkdir(parents=True, exist_ok=True)
            (tree / source).write_text(text, encoding="utf-8")
        (tree / release.licence).write_bytes((_released(release) / "LICENSE").read_bytes())
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(QuietHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def test_the_prompts_are_extracted_checked_and_written(mirror, tmp_path, capsys):
    assert main(["data", "fetch", "methods", "--data-dir", str(tmp_path / "data"), "--base-url", mirror]) == 0
    out = capsys.readouterr().out
    assert "zipact: 11 prompts and the licence" in out and "reasoningbank: 2 prompts and the licence" in out
    assert "licence SHA-256 cfc7749b96f6…, not pinned" in out  # reported where no pin exists
    for release in RELEASES:
        folder = tmp_path / "data" / "methods" / release.method
        for lit in release.literals:
            assert (folder / lit.out).read_bytes() == (_released(release) / lit.out).read_bytes()
            assert hashlib.sha256((folder / lit.out).read_bytes()).hexdigest() == lit.sha256
        assert (folder / "LICENSE").read_bytes() == (_released(release) / "LICENSE").read_bytes()
    assert hashlib.sha256((tmp_path / "data/methods/zipact/LICENSE").read_bytes()).hexdigest() == ZIPACT.licence_sha256


def test_a_changed_prompt_is_refused_and_nothing_is_written(mirror, tmp_path):
    target = tmp_path / "mirror" / ZIPACT.repo / ZIPACT.commit / "src" / "prompts" / "zipact_prompts.py"
    target.write_text(target.read_text().replace("State Updater", "State Keeper"))
    with pytest.raises(MethodFetchError, match="not the pinned prompt"):
        fetch_release(ZIPACT, tmp_path / "data", mirror)
    assert not (tmp_path / "data" / "methods").exists()


def test_an_unreachable_source_is_a_clear_error(tmp_path, capsys):
    assert main(["data", "fetch", "methods", "--data-dir", str(tmp_path), "--base-url", "http://127.0.0.1:9"]) == 2
    assert "Could not download http://127.0.0.1:9/" in capsys.readouterr().err


def test_extract_reads_constants_and_f_string_bodies_as_written():
    source = 'A = "x\\ny"\nclass K:\n    def m(self):\n        v = f"""one {a}\n{self.b}"""\n'
    assert extract(source, "A", "s") == "x\ny"
    assert extract(source, "K.m.v", "s") == "one {a}\n{self.b}"
    with pytest.raises(MethodFetchError, match="no 'Q'"):
        extract(source, "Q.m.v", "s")


def test_the_releases_fetched_are_those_the_registered_methods_declare_each_once() -> None:
    assert releases() == [REASONINGBANK, ZIPACT]  # ZipAct and ZipAct+BM25 share one
