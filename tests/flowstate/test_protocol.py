"""Parsing model output: the four blocks, JSON mode, and everything models break."""

from __future__ import annotations

import json

import pytest

from flowstate import ProtocolMode, parse_output, protocol_schema
from tests.flowstate.fixtures import add, tagged


def test_well_formed_tagged_output():
    text = tagged(focus=[{"target_id": "h1", "reason": "r"}], delta=[add("a")],
                  calls=[{"name": "search", "arguments": {"q": 1}}], message=None)
    out = parse_output(text)
    assert out.errors == [] and out.warnings == []
    assert out.state_focus == [{"target_id": "h1", "reason": "r"}]
    assert out.state_delta[0]["state_id"] == "a"
    assert [(c.name, c.arguments) for c in out.tool_calls] == [("search", {"q": 1})]
    assert out.assistant_message is None and out.usable


def test_fences_prose_and_trailing_commas_are_repaired():
    text = ("Sure! Here is my answer:\n```text\n<state_focus>[]</state_focus>\n<state_delta>\n```json\n"
            '[{"operation": "add", "state_id": "a", "state_set": "knowledge",},]\n```\n</state_delta>\n'
            '<tool_calls>[]</tool_calls><assistant_message>{"content": "Hello"}</assistant_message>\n```')
    out = parse_output(text)
    assert out.errors == []
    assert out.state_delta == [{"operation": "add", "state_id": "a", "state_set": "knowledge"}]
    assert out.assistant_message == "Hello"


def test_missing_close_tag_ends_at_the_next_block():
    out = parse_output('<tool_calls>[{"name": "t", "arguments": {}}]\n<assistant_message>{"content": null}')
    assert [c.name for c in out.tool_calls] == ["t"] and out.errors == []


def test_a_broken_block_is_an_error_but_the_rest_is_kept():
    out = parse_output("<state_delta>[{oops</state_delta><tool_calls>[]</tool_calls>"
                       '<assistant_message>{"content": "done"}</assistant_message>')
    assert out.assistant_message == "done"
    assert len(out.errors) == 1 and out.errors[0].startswith("state_delta: invalid JSON")


def test_plain_prose_in_the_message_block_is_kept_with_a_warning():
    out = parse_output("<assistant_message>Your booking {BK-1} is done.</assistant_message>")
    assert out.assistant_message == "Your booking {BK-1} is done."
    assert out.warnings and out.errors == []


@pytest.mark.parametrize("text", ["", "   ", "I will now call the tool.",
                                  "<state_focus>[]</state_focus><state_delta>[]</state_delta>"
                                  "<tool_calls>[]</tool_calls><assistant_message>{\"content\": null}</assistant_message>"])
def test_outputs_with_nothing_usable(text):
    out = parse_output(text)
    assert not out.usable


def test_tool_call_arguments_as_a_json_string_are_decoded_and_malformed_ones_reported():
    out = parse_output('<tool_calls>[{"name": "a", "arguments": "{\\"x\\": 1}"}, {"name": "b", "arguments": "{x"},'
                       ' {"type": "function", "function": {"name": "c", "arguments": {}}}, {"arguments": {}}, 7]</tool_calls>')
    assert [(c.name, c.arguments) for c in out.tool_calls] == [("a", {"x": 1}), ("c", {})]
    assert len(out.errors) == 3 and "malformed arguments for 'b'" in out.errors[0]


@pytest.mark.parametrize("protocol", [ProtocolMode.TAGGED, ProtocolMode.JSON])
@pytest.mark.parametrize(("arguments", "kind"), [("null", "null"), ("[1, 2]", "a list"), ('"\\"s\\""', "a string"),
                                                 ("3", "a number"), ('"[1]"', "a list"), ("true", "a boolean")])
def test_non_object_arguments_are_a_protocol_error_of_that_call_and_the_others_still_run(protocol, arguments, kind):
    calls = f'[{{"name": "a", "arguments": {arguments}}}, {{"name": "b", "arguments": {{"k": 1}}}}, {{"name": "c"}}]'
    text = (f"<tool_calls>{calls}</tool_calls>" if protocol is ProtocolMode.TAGGED else
            f'{{"tool_calls": {calls}, "assistant_message": {{"content": null}}}}')
    out = parse_output(text, protocol)
    assert [(c.name, c.arguments) for c in out.tool_calls] == [("b", {"k": 1}), ("c", {})]  # absent: no arguments
    assert out.errors == [f"tool_calls: the arguments of 'a' are {kind}, not an object; the call was not run"]


def test_a_single_object_where_a_list_belongs_is_wrapped():
    out = parse_output('<state_focus>{"target_id": "x", "reason": ""}</state_focus>')
    assert out.state_focus == [{"target_id": "x", "reason": ""}] and out.warnings


def test_json_mode():
    payload = {"state_focus": [], "state_delta": [add("a")], "tool_calls": [{"name": "t", "arguments": {"k": "v"}}],
               "assistant_message": {"content": None}}
    out = parse_output(json.dumps(payload), ProtocolMode.JSON)
    assert out.errors == [] and out.state_delta[0]["state_id"] == "a" and out.tool_calls[0].name == "t"


def test_json_mode_falls_back_to_tagged_and_vice_versa():
    assert parse_output(tagged(message="hi"), ProtocolMode.JSON).assistant_message == "hi"
    assert parse_output('{"tool_calls": [], "assistant_message": {"content": "hi"}}').assistant_message == "hi"


@pytest.mark.parametrize("text", ["[1, 2]", '{"assistant_message": {"text": "x"}}', "{not json"])
def test_json_mode_errors(text):
    out = parse_output(text, ProtocolMode.JSON)
    assert out.errors and not out.usable


def test_schema_lists_fields_in_protocol_order_and_restricts_tool_names():
    full = protocol_schema(tool_names=["a", "b"])
    assert list(full["properties"]) == ["state_focus", "state_delta", "tool_calls", "assistant_message"]
    assert full["required"] == list(full["properties"])
    assert full["properties"]["tool_calls"]["items"]["properties"]["name"]["enum"] == ["a", "b"]
    react = protocol_schema(state_blocks=())
    assert list(react["properties"]) == ["tool_calls", "assistant_message"]
    delta_only = protocol_schema(state_blocks=("state_delta",))
    assert list(delta_only["properties"]) == ["state_delta", "tool_calls", "assistant_message"]
