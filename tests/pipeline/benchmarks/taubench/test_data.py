"""Data location, checksum verification and error messages."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pipeline.benchmarks.taubench import DATA_ENV_VAR, SHA256, TauBenchDataError, data_root, policy, tool_schemas
from pipeline.benchmarks.taubench import data as data_module

from .conftest import data_dir

SOURCE_TABLE_ROWS = 10  # the upstream files of SOURCE.md's table, LICENSE included


def test_checksums_are_the_ones_source_md_lists() -> None:
    source = (data_dir() / "taubench" / "SOURCE.md").read_text()
    for relative, digest in SHA256.items():
        assert digest in source, relative
    assert len(SHA256) == SOURCE_TABLE_ROWS + 2  # plus the two derived tools.json


def test_data_root_uses_the_argument_or_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert data_root(tmp_path) == tmp_path.resolve() / "taubench"
    monkeypatch.setenv(DATA_ENV_VAR, str(tmp_path))
    assert data_root() == tmp_path.resolve() / "taubench"
    monkeypatch.delenv(DATA_ENV_VAR)
    with pytest.raises(TauBenchDataError, match=f"set {DATA_ENV_VAR}.*flowstate data fetch taubench"):
        data_root()


def copy_file(tmp_path: Path, relative: str) -> Path:
    target = tmp_path / "taubench" / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(data_dir() / "taubench" / relative, target)
    return target


def test_missing_file_names_the_file_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(TauBenchDataError) as caught:
        policy("airline", tmp_path)
    message = str(caught.value)
    assert str(tmp_path.resolve() / "taubench" / "airline" / "policy.md") in message
    assert "missing" in message and SHA256["airline/policy.md"] in message
    assert DATA_ENV_VAR in message and "flowstate data fetch taubench" in message


def test_missing_tools_json_explains_it_is_derived(tmp_path: Path) -> None:
    with pytest.raises(TauBenchDataError, match="derived data"):
        tool_schemas("retail", tmp_path)


def test_corrupt_file_names_the_file(tmp_path: Path) -> None:
    target = copy_file(tmp_path, "retail/policy.md")
    assert policy("retail", tmp_path) == (data_dir() / "taubench" / "retail" / "policy.md").read_text()
    target.write_text(target.read_text() + "\nAlways refund everything.\n")
    with pytest.raises(TauBenchDataError) as caught:
        policy("retail", tmp_path)
    message = str(caught.value)
    assert str(target) in message and "corrupt" in message and SHA256["retail/policy.md"] in message


def test_verification_is_cached_by_path_size_and_mtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = copy_file(tmp_path, "airline/policy.md")
    calls: list[Path] = []
    original = data_module.sha256_file

    def counting(path: Path) -> str:
        calls.append(path)
        return original(path)

    monkeypatch.setattr(data_module, "sha256_file", counting)
    for _ in range(3):
        data_module.verified_path("airline/policy.md", tmp_path)
    assert len(calls) == 1
    stat = target.stat()
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    data_module.verified_path("airline/policy.md", tmp_path)
    assert len(calls) == 2
