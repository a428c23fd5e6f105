"""Dispatch of tool calls and rendering of results (TOOLS.md §2.1–2.2)."""

from __future__ import annotations

import inspect
import json

import pytest

from flowstate.environment import ToolCall
from pipeline.benchmarks.taubench import AirlineTools, RetailTools, tool_schemas

from .conftest import Session, gold_hashes, new_session


@pytest.mark.parametrize(("domain", "toolkit", "count"), [("airline", AirlineTools, 14), ("retail", RetailTools, 16)])
def test_tool_names_signatures_and_kinds_follow_tools_json(domain: str, toolkit: type, count: int) -> None:
    schemas = tool_schemas(domain)
    names = [schema["function"]["name"] for schema in schemas.tools]
    assert len(names) == count
    assert toolkit.tool_names == set(names) == set(schemas.kinds)
    for schema in schemas.tools:
        function = schema["function"]
        parameters = list(inspect.signature(getattr(toolkit, function["name"])).parameters)[1:]
        assert parameters == list(function["parameters"].get("properties", {}))
        # Every parameter is required upstream, so Python's own "missing" messages apply.
        assert all(
            param.default is inspect.Parameter.empty
            for param in inspect.signature(getattr(toolkit, function["name"])).parameters.values()
        )
    writes = {name for name, kind in schemas.kinds.items() if kind == "write"}
    expected = (
        {"book_reservation", "cancel_reservation", "send_certificate", "update_reservation_baggages",
         "update_reservation_flights", "update_reservation_passengers"}
        if domain == "airline"
        else {"cancel_pending_order", "exchange_delivered_order_items", "modify_pending_order_address",
              "modify_pending_order_items", "modify_pending_order_payment", "modify_user_address",
              "return_delivered_order_items"}
    )
    assert writes == expected
    assert schemas.kinds["calculate"] == schemas.kinds["transfer_to_human_agents"] == "generic"


@pytest.mark.parametrize(
    "name",
    ["", "nope", "Get_User_Details", "_user", "_get_user", "db", "execute", "tool_names", "get_statistics",
     "use_tool", "get_order_details", "__init__", "calculate "],
)
def test_unknown_tools_are_errors_without_state_change(airline: Session, name: str) -> None:
    result = airline.call(name, {"user_id": "mia_li_3668"})
    assert result.error
    assert result.content == f"Error: Tool '{name}' not found."
    assert airline.db.changed_records() == {}


def test_other_domains_tools_are_unknown(retail: Session) -> None:
    assert retail.call("book_reservation", {}).content == "Error: Tool 'book_reservation' not found."
    assert retail.call("get_reservation_details", {}).content == "Error: Tool 'get_reservation_details' not found."


def test_python_argument_errors_name_the_tool_class(airline: Session, retail: Session) -> None:
    assert airline.err("get_user_details", user_id="x", foo=1) == (
        "AirlineTools.get_user_details() got an unexpected keyword argument 'foo'"
    )
    assert retail.err("cancel_pending_order", order_id="#W0000000") == (
        "RetailTools.cancel_pending_order() missing 1 required positional argument: 'reason'"
    )
    assert retail.err("calculate") == "RetailTools.calculate() missing 1 required positional argument: 'expression'"
    assert airline.err("transfer_to_human_agents", summary="s", kwargs=1) == (
        "AirlineTools.transfer_to_human_agents() got an unexpected keyword argument 'kwargs'"
    )
    assert airline.err("update_reservation_baggages", reservation_id="4WQ150") == (
        "AirlineTools.update_reservation_baggages() missing 3 required positional arguments: "
        "'total_baggages', 'nonfree_baggages', and 'payment_id'"
    )
    assert airline.err("list_all_airports", x=1) == "AirlineTools.list_all_airports() got an unexpected keyword argument 'x'"


def test_colliding_argument_names_fail_before_lookup(airline: Session) -> None:
    for name in ("get_user_details", "no_such_tool"):
        assert airline.call(name, {"user_id": "x", "tool_name": "x"}).content == (
            "Error: Environment.make_tool_call() got multiple values for argument 'tool_name'"
        )
        assert airline.call(name, {"self": "x"}).content == (
            "Error: Environment.make_tool_call() got multiple values for argument 'self'"
        )
        # requestor collides while the keyword arguments are merged, before the other two.
        assert airline.call(name, {"self": 1, "tool_name": 2, "requestor": "user"}).content == (
            "Error: tau2.environment.environment.Environment.make_tool_call() got multiple values for keyword "
            "argument 'requestor'"
        )
        # Between self and tool_name, the first one given is reported.
        assert airline.call(name, {"tool_name": 1, "self": 2}).content.endswith("argument 'tool_name'")
        assert airline.call(name, {"self": 1, "tool_name": 2}).content.endswith("argument 'self'")
    assert airline.db.changed_records() == {}


def test_non_object_arguments_fail_like_double_star_on_a_non_mapping(airline: Session) -> None:
    for arguments, type_name in (([1], "list"), ("x", "str"), (None, "NoneType"), (3, "int")):
        result = airline.tools.execute(ToolCall(name="get_user_details", arguments=arguments))
        assert result.error
        assert result.content == (
            "Error: tau2.environment.environment.Environment.make_tool_call() argument after ** must be a mapping, "
            f"not {type_name}"
        )


def test_results_are_json_dumps_defaults_and_strings_pass_through(airline: Session, retail: Session) -> None:
    content = airline.call("get_reservation_details", {"reservation_id": "4WQ150"}).content
    assert content.startswith('{"reservation_id": "4WQ150", "user_id": "chen_jackson_3290", ')
    assert content.endswith('"insurance": "no", "status": null}')
    assert airline.call("get_flight_status", {"flight_number": "HAT170", "date": "2024-05-22"}).content == "available"
    assert airline.call("transfer_to_human_agents", {"summary": "x"}).content == "Transfer successful"
    assert retail.call("find_user_id_by_email", {"email": "noah.brown7922@example.com"}).content == "noah_brown_6181"
    assert airline.call("calculate", {"expression": "2 + 2"}).content == "4.0"


def test_raw_arguments_are_not_aliased_into_the_db(airline: Session) -> None:
    arguments = {"reservation_id": "4WQ150", "passengers": [None, None, None]}
    airline.ok("update_reservation_passengers", **arguments)
    arguments["passengers"].append("mutated later")
    assert airline.record("reservations", "4WQ150")["passengers"] == [None, None, None]
    assert airline.db.canonical_hash() != gold_hashes()["airline"]["initial_hash"]


def test_a_call_sequence_sees_earlier_effects() -> None:
    session = new_session("airline")
    session.ok("send_certificate", user_id="mia_li_3668", amount=10)
    second = session.call("send_certificate", {"user_id": "mia_li_3668", "amount": 20}).content
    assert second == "Certificate certificate_3221323 added to user mia_li_3668 with amount 20."
    assert json.loads(session.call("get_user_details", {"user_id": "mia_li_3668"}).content)["payment_methods"][
        "certificate_3221323"
    ] == {"source": "certificate", "id": "certificate_3221323", "amount": 20.0}
