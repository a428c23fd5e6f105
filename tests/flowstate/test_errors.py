"""One error root: every error of the method a user can act on is a FlowStateError (the CLI prints it
as one line, exit 2), keeping the builtin base its callers catch it by; an internal signal is not."""

from __future__ import annotations

from pathlib import Path

import pytest

import flowstate
from flowstate import ContextOverflowError, FlowStateError, Registry, TaskPrompt, UnknownPluginError, new_session
from flowstate.data import MethodDataError, read_method_file
from flowstate.methods.tokenizer import TokenizerUnavailableError, encoding
from flowstate.trace import TraceError, replay_trace


def test_an_unknown_plugin_name_is_a_flowstate_error_and_a_key_error() -> None:
    with pytest.raises(UnknownPluginError) as raised:
        new_session("bm26", TaskPrompt(task_policy="P", available_tools="T"))
    assert isinstance(raised.value, FlowStateError) and isinstance(raised.value, KeyError)
    with pytest.raises(FlowStateError, match=r"^no shape 'square' is registered \(known: none\)$"):
        Registry("shape", "kind").get("square")


def test_a_trace_that_contradicts_itself_is_a_flowstate_error_and_a_value_error() -> None:
    trace = {"requests": [{"query": "q", "steps": [{"completion": "<assistant_message>\nhi\n</assistant_message>",
                                                     "observation": "an observation nobody asked for"}]}]}
    with pytest.raises(TraceError, match="an observation is given but the completion calls no tool") as raised:
        replay_trace(trace)
    assert isinstance(raised.value, FlowStateError) and isinstance(raised.value, ValueError)


def test_a_missing_released_prompt_is_a_flowstate_error_and_a_runtime_error(tmp_path: Path) -> None:
    with pytest.raises(MethodDataError, match="flowstate data fetch methods") as raised:
        read_method_file("zipact", "agent_actor_user_template.txt", "0" * 64, tmp_path)
    assert isinstance(raised.value, FlowStateError) and isinstance(raised.value, RuntimeError)


def test_an_unavailable_tokenizer_is_a_flowstate_error_and_a_runtime_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    encoding.cache_clear()
    try:
        with pytest.raises(TokenizerUnavailableError, match="unset it or name a directory") as raised:
            encoding("o200k_base")
    finally:
        encoding.cache_clear()
    assert isinstance(raised.value, FlowStateError) and isinstance(raised.value, RuntimeError)


def test_a_context_overflow_is_an_internal_signal_not_a_user_error() -> None:
    assert not issubclass(ContextOverflowError, FlowStateError)  # the loop ends the episode with it


def test_the_root_is_exported_from_the_package() -> None:
    assert "FlowStateError" in flowstate.__all__ and flowstate.FlowStateError is FlowStateError
