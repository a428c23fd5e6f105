"""ZipAct and ZipAct+BM25: the released prompts with each benchmark's world state, the inline and the
separate updater, attempted actions kept by code, failed updates kept out, the state across requests."""

from __future__ import annotations

import asyncio
import json
from importlib import resources
from pathlib import Path

import pytest

from flowstate import (
    ChatMessage,
    Completion,
    MethodCallers,
    RequestEnd,
    RequestOutcome,
    RequestStart,
    TaskPrompt,
    new_session,
    parse_output,
)
from flowstate.data import MethodDataError
from flowstate.methods.zipact import parse_state
from flowstate.methods.zipact.prompts import (
    actor_rules,
    initial_state,
    inline_rules,
    updater_system,
    world_state,
)
from flowstate.methods.zipact.release import RELEASE
from flowstate.protocol import ProtocolMode, render_output

ALFWORLD_FIELDS = ("location", "inventory", "entity_map", "discovered_objects", "visited_locations")
WORLD_FILES = sorted(p.name.removesuffix(".json") for p in resources.files("flowstate.methods.zipact")
                     .joinpath("world_state").iterdir() if p.name.endswith(".json"))


def _task(benchmark: str | None = "taubench", domain: str | None = "airline") -> TaskPrompt:
    return TaskPrompt(task_policy="P", available_tools="T", benchmark=benchmark, domain=domain)


@pytest.mark.usefixtures("released_prompts")
@pytest.mark.parametrize("name", WORLD_FILES)
def test_each_benchmarks_world_state_replaces_alfworlds_everywhere(name):
    benchmark, _, domain = name.partition(".")
    world = world_state(benchmark if domain else None, domain or None)
    for text in (inline_rules(world), updater_system(world), actor_rules(world)):
        assert not any(field in text for field in ALFWORLD_FIELDS)
        assert all(f.name in text for f in world.fields) and "visited" in text
    schema_part = updater_system(world).split("```json\n")[1].split("\n```")[0]
    assert json.loads(schema_part.replace("[...]", "[]").replace('"..."', '""'))["world_state"] == {
        f.name: f.initial for f in world.fields}
    assert set(initial_state(world)["world_state"]) == {f.name for f in world.fields}


def test_a_benchmark_without_its_own_fields_gets_the_generic_ones():
    assert world_state("tiny", "lookup") == world_state(None, None) == world_state("default", None)


@pytest.mark.usefixtures("released_prompts")
def test_inline_rules_speak_to_an_agent_that_acts_and_the_actor_keeps_only_its_decision_rules():
    world = world_state("taubench", "retail")
    inline = inline_rules(world)
    assert inline.startswith("Besides acting, you maintain") and "execution_state" in inline
    assert "You will receive" not in inline and "Output ONLY valid JSON" not in inline
    actor = actor_rules(world)
    assert "## Decision Protocol" in actor and "Thought:" not in actor and "go to <receptacle" not in actor
    assert "The tools listed in <tools>" in actor


def test_missing_or_changed_prompts_are_clear_errors(tmp_path):
    with pytest.raises(MethodDataError, match="flowstate data fetch methods"):
        inline_rules(world_state(None, None), tmp_path)
    folder = tmp_path / "methods" / "zipact"
    folder.mkdir(parents=True)
    for name in (lit.out for lit in RELEASE.literals):
        (folder / name).write_text("not the released prompt")
    with pytest.raises(MethodDataError, match="SHA-256 differs"):
        updater_system(world_state(None, None), tmp_path)


def _output(state: dict | None, calls: list | None = None, message: str | None = None, mode: str = "tagged") -> str:
    blocks = ("execution_state",) if state is not None else ()
    return render_output(ProtocolMode(mode), state_blocks=blocks, execution_state=state, calls=calls, message=message)


def _status(prompt: str) -> dict:
    return json.loads(prompt.split("<agent_status>\n")[1].split("\n</agent_status>")[0])


def _begin(session, index: int, query: str, memory_query: str | None = None) -> None:
    session.clock.request, session.clock.step = index, 0
    asyncio.run(session.begin_request(RequestStart(index=index, query=query, memory_query=memory_query or query)))


def _end(session, index: int, entries: list[str] | None = None) -> None:
    asyncio.run(session.end_request(RequestOutcome(index=index, query="", ended=RequestEnd.RESPONSE, final_response=None,
                                                   steps=[], memory_entries=entries or [])))


@pytest.mark.usefixtures("released_prompts")
def test_inline_the_agent_rewrites_the_state_and_code_keeps_the_attempted_actions():
    session = new_session({"name": "zipact", "protocol": "json"}, _task(), ["get_user"])
    assert list(session.json_schema["properties"]) == ["execution_state", "tool_calls", "assistant_message"]
    _begin(session, 1, "I am user_7, cancel my trip")
    assert _status(asyncio.run(session.messages(None))[1].content) == initial_state(session.world)
    call = {"name": "get_user", "arguments": {"user_id": "user_7"}}
    state = initial_state(session.world)
    state["goal_state"]["global_instruction"] = "cancel the trip of user_7"
    state["constraint_state"]["attempted_actions"] = ["something the model made up"]
    parsed = parse_output(_output(state, calls=[call, call], mode="json"), ProtocolMode.JSON)
    asyncio.run(session.apply(parsed))
    obs = asyncio.run(session.add_observation(1, "USER-7-PROFILE", "raw"))
    shown = _status(asyncio.run(session.messages(obs))[1].content)
    assert shown["goal_state"]["global_instruction"] == "cancel the trip of user_7"
    assert shown["constraint_state"]["attempted_actions"] == ['get_user({"user_id": "user_7"})']  # code's, once
    [record] = session.records
    assert (record.kind, record.payload["updater"], record.payload["parsed"]) == ("state_update", "inline", True)
    assert record.payload["before"] == initial_state(session.world) and record.payload["after"] == shown
    # an output without a usable state keeps the old one, and says why
    asyncio.run(session.apply(parse_output('{"execution_state": [1], "tool_calls": [], "assistant_message": '
                                           '{"content": "Done."}}', ProtocolMode.JSON)))
    assert session.state == shown and session.records[-1].payload["parsed"] is False
    assert "expected a JSON object" in session.records[-1].payload["error"]
    _end(session, 1)
    # the state persists; the history never appears
    _begin(session, 2, "and the other one")
    user = asyncio.run(session.messages(None))[1].content
    assert _status(user) == shown and "USER-7-PROFILE" not in user and "cancel my trip" not in user


@pytest.mark.usefixtures("released_prompts")
def test_separate_the_methods_own_model_updates_the_state_after_each_step():
    updates: list[list[ChatMessage]] = []

    class Updater:
        async def complete(self, messages, *, json_schema=None):
            updates.append(list(messages))
            previous = json.loads(messages[-1].content.split("```json\n")[1].split("\n```")[0])
            previous["world_state"]["user"] = {"seen": len(updates)}
            return Completion(text="Here:\n```json\n" + json.dumps(previous)[:-1] + ",\n}\n```")  # fenced, a trailing comma

    with pytest.raises(ValueError, match="memory_model"):
        new_session({"name": "zipact", "updater": "separate"}, _task(), ["get_user"])
    session = new_session({"name": "zipact", "updater": "separate"}, _task(), ["get_user"],
                          MethodCallers(memory=Updater()))
    assert session.state_blocks() == () and "execution_state" not in session.system_message.content
    assert "## Decision Protocol" in session.system_message.content
    _begin(session, 1, "I am user_7")  # the request is the first observation
    assert "Last Action: None" in updates[0][1].content and "New Observation:\nI am user_7" in updates[0][1].content
    assert updates[0][0].content == updater_system(session.world)
    asyncio.run(session.apply(parse_output(_output(None, calls=[{"name": "get_user", "arguments": {"user_id": "u"}}]))))
    asyncio.run(session.add_observation(1, "PROFILE", "raw"))
    assert 'Last Action: get_user({"user_id": "u"})' in updates[1][1].content
    assert session.state["world_state"]["user"] == {"seen": 2}
    assert session.state["constraint_state"]["attempted_actions"] == ['get_user({"user_id": "u"})']
    assert [r.payload["parsed"] for r in session.records] == [True, True]


@pytest.mark.usefixtures("released_prompts")
def test_separate_a_reply_that_is_not_a_state_keeps_the_old_one():
    class Garbage:
        async def complete(self, messages, *, json_schema=None):
            return Completion(text="I cannot do that")

    session = new_session({"name": "zipact", "updater": "separate"}, _task(), [], MethodCallers(memory=Garbage()))
    _begin(session, 1, "hello")
    assert session.state == initial_state(session.world)
    assert session.records[0].payload == {"updater": "separate", "parsed": False,
                                          "error": "the updater's reply is not a JSON object",
                                          "before": initial_state(session.world), "after": initial_state(session.world)}


@pytest.mark.parametrize(("text", "expected"), [
    ('```json\n{"a": 1,}\n```', {"a": 1}),
    ('prose ```\n{"a": [1, 2,]}\n``` more', {"a": [1, 2]}),
    ('{"a": 1}', {"a": 1}),
    ("[1, 2]", None),
    ("no json here", None),
    ('```json\n{"a": 1}\n``` and ```json\n{"b": 2}\n```', {"a": 1}),  # the first block
])
def test_the_updater_reply_is_read_as_upstream_reads_it(text, expected):
    assert parse_state(text) == expected


@pytest.mark.usefixtures("released_prompts")
def test_zipact_bm25_adds_retrieved_memory_above_the_state():
    session = new_session({"name": "zipact_bm25", "top_k": 1}, _task("memoryarena", "group_travel_planner"), [])
    assert session.world == world_state("memoryarena", "group_travel_planner")
    _begin(session, 1, "plan for Ann")
    user = asyncio.run(session.messages(None))[1].content
    assert user.startswith("<memory>\nNone\n</memory>\n<agent_status>\n")
    _end(session, 1, ["Ann flies from Austin to Denver on May 5", "Bob is vegan", "Cara likes museums"])
    _begin(session, 2, "plan for Dan, who joins Ann", memory_query="Dan joins Ann")
    user = asyncio.run(session.messages(None))[1].content
    assert user.split("<memory>\n")[1].split("\n</memory>")[0] == "Ann flies from Austin to Denver on May 5"
    assert [r.kind for r in session.records] == ["retrieval", "write", "retrieval"]


def test_the_shipped_world_state_files_are_package_data():
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert '"methods/zipact/world_state/*.json"' in pyproject
