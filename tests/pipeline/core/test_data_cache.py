"""``cached_json``: built once per machine, read back by later processes, rebuilt when damaged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.core.data import cached_json


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FLOWSTATE_CACHE", str(tmp_path))
    return tmp_path


class Builder:
    def __init__(self, value: object) -> None:
        self.value, self.calls = value, 0

    def __call__(self) -> object:
        self.calls += 1
        return self.value


VALUE = {"b": [1, 2.5, None, "é"], "a": {"z": True, "y": "x"}}


def test_a_value_is_built_once_and_read_back_in_its_order(cache: Path) -> None:
    build = Builder(VALUE)
    first = cached_json("things", "k1", build)
    second = cached_json("things", "k1", build)
    assert first == second == VALUE and build.calls == 1
    assert list(second) == ["b", "a"] and list(second["a"]) == ["z", "y"]
    assert json.loads((cache / "things" / "k1.json").read_bytes()) == VALUE
    assert cached_json("things", "k2", Builder({"other": 1})) == {"other": 1}  # another key, another value


@pytest.mark.parametrize("damage", ["truncate", "flip", "no_checksum", "not_json"])
def test_a_damaged_cache_is_built_again(cache: Path, damage: str) -> None:
    cached_json("things", "k", Builder(VALUE))
    path, checksum = cache / "things" / "k.json", cache / "things" / "k.sha256"
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "flip":  # still valid JSON, different content: only the checksum tells
        path.write_bytes(data.replace(b"2.5", b"3.5"))
    elif damage == "no_checksum":
        checksum.unlink()
    else:
        path.write_bytes(b"\x00garbage")
        checksum.write_text("00")
    build = Builder(VALUE)
    assert cached_json("things", "k", build) == VALUE and build.calls == 1
    assert cached_json("things", "k", build) == VALUE and build.calls == 1  # repaired


def test_values_json_cannot_hold_exactly_are_not_cached(cache: Path) -> None:
    build = Builder({"pair": (1, 2)})  # a tuple comes back as a list
    assert cached_json("things", "t", build) == {"pair": (1, 2)}
    assert cached_json("things", "t", build) == {"pair": (1, 2)} and build.calls == 2
    assert not (cache / "things" / "t.json").exists()


def test_an_unwritable_cache_still_gives_the_value(cache: Path) -> None:
    (cache / "things").write_text("a file where the folder should be")
    build = Builder(VALUE)
    assert cached_json("things", "k", build) == VALUE
    assert cached_json("things", "k", build) == VALUE and build.calls == 2
