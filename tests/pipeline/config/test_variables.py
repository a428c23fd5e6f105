"""``${VAR}`` in job files reads the environment and nothing else, runs nothing, and cannot change a
job's structure; a malformed reference is an error naming the file and line."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from pipeline.config.job import load_job
from pipeline.config.variables import VariableError, expand_variables
from pipeline.config.yaml_loader import ConfigError, load_yaml
from tests.pipeline.config.test_config import GOOD

# What a process does besides reading its own input: the audit events of Python's runtime
# (https://docs.python.org/3/library/audit_events.html) that start programs, open files or sockets.
_WATCHED = ("subprocess.", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.startfile",
            "os.popen", "pty.spawn", "open", "socket.", "ctypes.dlopen", "import", "exec", "compile")
_EVENTS: list[tuple[str, tuple[Any, ...]]] = []
_RECORDING: list[bool] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _RECORDING and event.startswith(_WATCHED):
        _EVENTS.append((event, args))


sys.addaudithook(_audit)  # hooks cannot be removed; this one records only inside `audited`


def audited(path: Path, environ: dict[str, str]) -> tuple[Any, list[tuple[str, tuple[Any, ...]]]]:
    """``load_yaml`` of ``path`` with what it did besides reading it."""
    _EVENTS.clear()
    _RECORDING.append(True)
    try:
        data = load_yaml(path, environ).data
    finally:
        _RECORDING.clear()
    return data, [(e, a) for e, a in _EVENTS if not (e == "open" and str(a[0]) == str(path))]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return path


HOSTILE_VALUES = [
    "$(touch {marker})",
    "`touch {marker}`",
    "${{HOME}}; touch {marker}",
    "x\nplugins: [os]\nname: evil",
    "!!python/object/apply:os.system ['touch {marker}']",
    "*anchor",
    "&anchor value",
    "a: b",
    "{{inject: 1}}",
    "[1, 2]",
    "value # not a comment",
    "'quoted' \"double\"",
]


@pytest.mark.parametrize("hostile", HOSTILE_VALUES)
def test_a_value_is_text_in_its_scalar_never_run_or_parsed_as_yaml(tmp_path, hostile):
    marker = tmp_path / "ran"
    value = hostile.format(marker=marker)
    path = write(tmp_path, "plain: ${EVIL}\nquoted: \"${EVIL}\"\nflow: {a: ${EVIL}, b: [${EVIL}]}\ninner: x-${EVIL}-y\n")
    data, events = audited(path, {"EVIL": value, "HOME": "/home/someone"})
    assert data == {"plain": value, "quoted": value, "flow": {"a": value, "b": [value]}, "inner": f"x-{value}-y"}
    assert events == [] and not marker.exists()


@pytest.mark.parametrize("text", [
    "a: $(touch {marker})\n", "a: x `touch {marker}`\n", "a: ${{X:-}}$(touch {marker})\n", "a: $X\n", "a: $$X\n",
    "a: ${{UNSET:-`touch {marker}`}}\n",
])
def test_shell_syntax_outside_a_reference_is_plain_text(tmp_path, text):
    marker = tmp_path / "ran"
    path = write(tmp_path, text.format(marker=marker))
    data, events = audited(path, {"X": "value"})
    assert data["a"] == text.format(marker=marker)[3:-1].replace("${X:-}", "value").replace("${UNSET:-", "").rstrip("}")
    assert events == [] and not marker.exists()


def test_values_are_never_expanded_again_and_only_the_given_environment_is_read(tmp_path, monkeypatch):
    monkeypatch.setenv("OTHER", "from os.environ")
    data, events = audited(write(tmp_path, "a: ${A}\nb: ${B:-fallback}\nc: $${A}\n"),
                           {"A": "${OTHER} $(id) ${B:-x}", "OTHER": "from the mapping"})
    assert data == {"a": "${OTHER} $(id) ${B:-x}", "b": "fallback", "c": "${A}"} and events == []
    with pytest.raises(ConfigError, match="OTHER is not set"):
        load_yaml(write(tmp_path, "a: ${OTHER}\n"), {})  # os.environ has it; the mapping given does not


def test_plain_scalars_are_typed_from_the_value_quoted_ones_stay_strings(tmp_path):
    path = write(tmp_path, "n: ${N}\nq: '${N}'\nf: ${F}\nb: ${B}\nempty: ${E}\nmixed: ${N}${N}\nmerge: ${M}\n")
    data, _ = audited(path, {"N": "2", "F": "0.5", "B": "true", "E": "", "M": "<<"})
    assert data == {"n": 2, "q": "2", "f": 0.5, "b": True, "empty": None, "mixed": 22, "merge": "<<"}


def test_references_in_comments_are_ignored_and_an_unset_variable_names_its_line(tmp_path):
    path = write(tmp_path, "# ${UNSET} and ${not a reference}\na: 1\nb:\n  - ${UNSET}\n")
    with pytest.raises(ConfigError, match=r"job.yaml:4: environment variable UNSET is not set \(and \$\{UNSET\} has no"):
        load_job(path)
    assert load_yaml(write(tmp_path, "# ${UNSET}\na: 1\n"), {}).data == {"a": 1}


@pytest.mark.parametrize("reference", [
    "${}", "${1X}", "${X", "${X:?err}", "${X-default}", "${X:=v}", "${#X}", "${X/a/b}", "${!X}", "${X:-${Y}}",
    "${X:-$(id)}", "${X:-a{b}", "${ X }", "${X.Y}", "${Ä}",
])
def test_a_malformed_reference_is_an_error_naming_the_line(tmp_path, reference):
    path = write(tmp_path, f"name: x\nmodel: {reference}\n")
    with pytest.raises(ConfigError, match=r"job.yaml:2: '\$\{.*' is not a variable reference: write \$\{NAME\}"):
        load_yaml(path, {"X": "1", "Y": "2"})


def test_a_value_cannot_add_keys_to_a_job(tmp_path, monkeypatch):
    """A newline in a value would add ``plugins:`` (imported: code run) were values pasted into the text."""
    monkeypatch.setenv("FLOWSTATE_TEXT", "text\nplugins: [tests.plugins.nothing_here]")
    job = load_job(write(tmp_path, GOOD + "description: ${FLOWSTATE_TEXT}\n"))
    assert job.plugins == [] and job.description == "text\nplugins: [tests.plugins.nothing_here]"


def test_one_string_expands_with_the_same_rules():
    assert expand_variables("sqlite:///db?password=${PW}", environ={"PW": "p$(id)"}) == "sqlite:///db?password=p$(id)"
    with pytest.raises(VariableError, match="'\\$\\{PW' is not a variable reference"):
        expand_variables("x${PW", environ={"PW": "p"})
