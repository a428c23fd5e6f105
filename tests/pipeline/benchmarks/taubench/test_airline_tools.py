"""Airline tools (TOOLS.md §3, §4): success paths, every error path, typing and no-rollback cases."""

from __future__ import annotations

from typing import Any

from .conftest import Session, canonical_reservation, gold_hashes, new_session, raw_db

USER = "mei_hernandez_8984"  # gift card 98.0, two 250.0 certificates, two credit cards
GIFT, CERT_A, CERT_B, CARD = "gift_card_5309492", "certificate_7502997", "certificate_3321326", "credit_card_2140654"
RES = "1AKIA8"  # economy, 2 passengers, HAT070 2024-05-22 + HAT297 2024-05-23, paid 730 by card


def flights() -> dict[str, Any]:
    return raw_db("airline")["flights"]


def date_entry(flight: str, date: str) -> dict[str, Any]:
    return flights()[flight]["dates"][date]


def booking(**overrides: Any) -> dict[str, Any]:
    """A valid one-passenger economy booking on HAT014 (JFK→MIA, 2024-05-20), paid by card."""
    price = date_entry("HAT014", "2024-05-20")["prices"]["economy"]
    arguments = {
        "user_id": USER, "origin": "JFK", "destination": "MIA", "flight_type": "one_way", "cabin": "economy",
        "flights": [{"flight_number": "HAT014", "date": "2024-05-20"}],
        "passengers": [{"first_name": "Mei", "last_name": "Hernandez", "dob": "1981-01-11"}],
        "payment_methods": [{"payment_id": CARD, "amount": price}],
        "total_baggages": 0, "nonfree_baggages": 0, "insurance": "no",
    }
    arguments.update(overrides)
    return arguments


def unchanged(session: Session) -> bool:
    return session.db.canonical_hash() == gold_hashes()["airline"]["initial_hash"]


# ---------------------------------------------------------------------------------------- reads


def test_get_user_details(airline: Session) -> None:
    user = airline.ok("get_user_details", user_id=USER)
    assert user == raw_db("airline")["users"][USER]
    assert list(user) == ["user_id", "name", "address", "email", "dob", "payment_methods", "saved_passengers",
                          "membership", "reservations"]
    assert airline.err("get_user_details", user_id="nobody") == "User nobody not found"
    assert airline.err("get_user_details", user_id=3206) == "User 3206 not found"
    assert airline.err("get_user_details", user_id=None) == "User None not found"
    assert airline.err("get_user_details", user_id=["x"]) == "unhashable type: 'list'"
    assert airline.err("get_user_details", user_id={"a": 1}) == "unhashable type: 'dict'"


def test_get_reservation_details(airline: Session) -> None:
    reservation = airline.ok("get_reservation_details", reservation_id=RES)
    assert reservation == canonical_reservation(raw_db("airline")["reservations"][RES])
    assert reservation["status"] is None
    assert airline.err("get_reservation_details", reservation_id=None) == "Reservation None not found"
    assert airline.err("get_reservation_details", reservation_id="1akia8") == "Reservation 1akia8 not found"


def test_list_all_airports(airline: Session) -> None:
    airports = airline.ok("list_all_airports")
    assert [entry["iata"] for entry in airports] == [
        "SFO", "JFK", "LAX", "ORD", "DFW", "DEN", "SEA", "ATL", "MIA", "BOS", "PHX", "IAH", "LAS", "MCO", "EWR",
        "CLT", "MSP", "DTW", "PHL", "LGA",
    ]
    assert airports[0] == {"iata": "SFO", "city": "San Francisco"}
    assert airports[-1] == {"iata": "LGA", "city": "LaGuardia"}
    assert all(list(entry) == ["iata", "city"] for entry in airports)


def direct(origin: Any, destination: Any, date: str, leave_after: str | None = None) -> list[dict[str, Any]]:
    """§4.4 applied to the raw file."""
    hits = []
    for flight in flights().values():
        entry = flight["dates"].get(date)
        if (
            (origin is None or flight["origin"] == origin)
            and (destination is None or flight["destination"] == destination)
            and entry is not None
            and entry["status"] == "available"
            and (leave_after is None or flight["scheduled_departure_time_est"] >= leave_after)
        ):
            hits.append({
                "flight_number": flight["flight_number"], "origin": flight["origin"],
                "destination": flight["destination"], "status": "available",
                "scheduled_departure_time_est": flight["scheduled_departure_time_est"],
                "scheduled_arrival_time_est": flight["scheduled_arrival_time_est"], "date": None,
                "available_seats": entry["available_seats"], "prices": entry["prices"],
            })
    return hits


def test_search_direct_flight(airline: Session) -> None:
    result = airline.ok("search_direct_flight", origin="JFK", destination="MIA", date="2024-05-20")
    assert result == direct("JFK", "MIA", "2024-05-20")
    assert [hit["flight_number"] for hit in result] == ["HAT014", "HAT060", "HAT126", "HAT209"]
    assert list(result[0]) == ["flight_number", "origin", "destination", "status", "scheduled_departure_time_est",
                               "scheduled_arrival_time_est", "date", "available_seats", "prices"]
    assert result[0]["date"] is None
    assert list(result[0]["prices"]) == ["basic_economy", "economy", "business"]
    # Past dates have no available entries; unknown airports and non-string dates match nothing.
    assert airline.ok("search_direct_flight", origin="JFK", destination="MIA", date="2024-05-15") == []
    assert airline.ok("search_direct_flight", origin="jfk", destination="MIA", date="2024-05-20") == []
    assert airline.ok("search_direct_flight", origin="JFK", destination="MIA", date=None) == []
    assert airline.ok("search_direct_flight", origin="JFK", destination="MIA", date=20240520) == []
    assert airline.ok("search_direct_flight", origin=1, destination="MIA", date="2024-05-20") == []


def test_search_direct_flight_null_is_a_wildcard_and_list_dates_raise(airline: Session) -> None:
    assert airline.ok("search_direct_flight", origin=None, destination="MIA", date="2024-05-20") == direct(
        None, "MIA", "2024-05-20"
    )
    every = airline.ok("search_direct_flight", origin=None, destination=None, date="2024-05-20")
    assert len(every) == sum(f["dates"].get("2024-05-20", {}).get("status") == "available" for f in flights().values())
    assert airline.err("search_direct_flight", origin="JFK", destination="MIA", date=["2024-05-20"]) == (
        "unhashable type: 'list'"
    )
    assert airline.err("search_direct_flight", origin=None, destination=None, date={}) == "unhashable type: 'dict'"
    # No flight passes the origin/destination tests: the date is never looked at.
    assert airline.ok("search_direct_flight", origin="XXX", destination="MIA", date=["2024-05-20"]) == []


def onestop(origin: Any, destination: Any, date: str) -> list[list[dict[str, Any]]]:
    """§4.5 applied to the raw file."""
    pairs = []
    for first in direct(origin, None, date):
        first = {**first, "date": date}
        second_date = f"2024-05-{int(date[-2:]) + 1}" if "+1" in first["scheduled_arrival_time_est"] else date
        for second in direct(first["destination"], destination, second_date, first["scheduled_arrival_time_est"]):
            pairs.append([first, {**second, "date": second_date}])
    return pairs


def test_search_onestop_flight(airline: Session) -> None:
    result = airline.ok("search_onestop_flight", origin="JFK", destination="DEN", date="2024-05-20")
    assert result == onestop("JFK", "DEN", "2024-05-20")
    assert result and all(first["date"] == "2024-05-20" for first, _ in result)
    # HAT261 JFK→ORD arrives 01:30:00+1: its connections are on 2024-05-21, compared as strings.
    overnight = [pair for pair in result if pair[0]["flight_number"] == "HAT261"]
    assert overnight and all(second["date"] == "2024-05-21" for _, second in overnight)
    assert {second["flight_number"] for _, second in overnight} == {"HAT049", "HAT118", "HAT238"}  # ORD→DEN
    assert airline.ok("search_onestop_flight", origin="JFK", destination="DEN", date=None) == []
    assert airline.ok("search_onestop_flight", origin="JFK", destination=None, date="2024-05-20") == onestop(
        "JFK", None, "2024-05-20"
    )
    assert airline.err("search_onestop_flight", origin="JFK", destination="DEN", date=["x"]) == "unhashable type: 'list'"
    assert airline.ok("search_onestop_flight", origin="XXX", destination="DEN", date=["x"]) == []


def test_get_flight_status(airline: Session) -> None:
    assert airline.call("get_flight_status", {"flight_number": "HAT170", "date": "2024-05-22"}).content == "available"
    assert airline.call("get_flight_status", {"flight_number": "HAT170", "date": "2024-05-15"}).content == "landed"
    assert airline.err("get_flight_status", flight_number="HAT170", date="2024-5-22") == (
        "Flight HAT170 not found on date 2024-5-22"
    )
    assert airline.err("get_flight_status", flight_number="HAT001", date=None) == "Flight HAT001 not found on date None"
    assert airline.err("get_flight_status", flight_number=1, date="2024-05-22") == "Flight 1 not found"
    assert airline.err("get_flight_status", flight_number="hat170", date="2024-05-22") == "Flight hat170 not found"
    statuses = {entry["status"] for flight in flights().values() for entry in flight["dates"].values()}
    assert statuses == {"available", "landed", "cancelled", "delayed", "flying", "on time"}
    assert date_entry("HAT018", "2024-05-11")["status"] == "delayed"


def test_transfer_to_human_agents(airline: Session) -> None:
    assert airline.call("transfer_to_human_agents", {"summary": None}).content == "Transfer successful"
    assert unchanged(airline)


# --------------------------------------------------------------------------------- book_reservation


def test_book_reservation_success_with_gift_card_certificate_and_card(airline: Session) -> None:
    entry = date_entry("HAT014", "2024-05-20")
    price = entry["prices"]["economy"]
    total = price * 2 + 30 * 2 + 50 * 1
    arguments = booking(
        passengers=[{"first_name": "Mei", "last_name": "Hernandez", "dob": "1981-01-11", "extra": "dropped"},
                    {"dob": "1959-05-28", "last_name": "Anderson", "first_name": "Anya"}],
        payment_methods=[{"payment_id": GIFT, "amount": 50.0}, {"payment_id": CERT_A, "amount": "10"},
                         {"payment_id": CARD, "amount": total - 60}],
        total_baggages="2", nonfree_baggages=1, insurance="yes",
    )
    reservation = airline.ok("book_reservation", **arguments)
    assert reservation == {
        "reservation_id": "HATHAT", "user_id": USER, "origin": "JFK", "destination": "MIA",
        "flight_type": "one_way", "cabin": "economy",
        "flights": [{"flight_number": "HAT014", "origin": "JFK", "destination": "MIA", "date": "2024-05-20",
                     "price": price}],
        "passengers": [{"first_name": "Mei", "last_name": "Hernandez", "dob": "1981-01-11"},
                       {"first_name": "Anya", "last_name": "Anderson", "dob": "1959-05-28"}],
        "payment_history": [{"payment_id": GIFT, "amount": 50}, {"payment_id": CERT_A, "amount": 10},
                            {"payment_id": CARD, "amount": total - 60}],
        "created_at": "2024-05-15T15:00:00", "total_baggages": 2, "nonfree_baggages": 1, "insurance": "yes",
        "status": None,
    }
    content = airline.call("get_reservation_details", {"reservation_id": "HATHAT"}).content
    assert '"amount": 50}' in content and '"total_baggages": 2,' in content  # coerced to ints
    user = airline.record("users", USER)
    assert user["payment_methods"][GIFT]["amount"] == 48.0
    assert isinstance(user["payment_methods"][GIFT]["amount"], float)
    assert CERT_A not in user["payment_methods"]  # consumed entirely
    assert CERT_B in user["payment_methods"]
    assert user["reservations"][-1] == "HATHAT"
    seats = airline.record("flights", "HAT014")["dates"]["2024-05-20"]["available_seats"]
    assert seats == {**entry["available_seats"], "economy": entry["available_seats"]["economy"] - 2}
    assert list(airline.db["reservations"])[-1] == "HATHAT"


def test_book_reservation_ids_and_too_many(airline: Session) -> None:
    empty = booking(flights=[], passengers=[], payment_methods=[])
    assert [airline.ok("book_reservation", **empty)["reservation_id"] for _ in range(3)] == ["HATHAT", "HATHAU", "HATHAV"]
    assert airline.err("book_reservation", **empty) == "Too many reservations"
    assert airline.record("reservations", "HATHAT")["flights"] == []  # 0 passengers, total 0, insurance free


def test_book_reservation_step1_iterates_lists_first(airline: Session) -> None:
    assert airline.err("book_reservation", **booking(flights=None, user_id="nobody")) == "'NoneType' object is not iterable"
    assert airline.err("book_reservation", **booking(passengers=3)) == "'int' object is not iterable"
    assert airline.err("book_reservation", **booking(payment_methods=None)) == "'NoneType' object is not iterable"
    # A validation error of flights comes before a non-iterable passengers argument.
    message = airline.err("book_reservation", **booking(flights=[{"flight_number": "HAT014"}], passengers=None))
    assert message.startswith("1 validation error for FlightInfo\ndate\n")
    assert airline.err("book_reservation", **booking(flights=[{"flight_number": 14, "date": "2024-05-20"}])).startswith(
        "1 validation error for FlightInfo"
    )
    assert "validation error for Payment" in airline.err(
        "book_reservation", **booking(payment_methods=[{"payment_id": CARD, "amount": 143.5}])
    )
    assert unchanged(airline)


def test_book_reservation_raw_lists(airline: Session) -> None:
    # Raw flights pass the record validation and fail on their first element in step 5.
    assert airline.err("book_reservation", **booking(flights=["HAT014"])) == "'str' object has no attribute 'flight_number'"
    assert airline.err("book_reservation", **booking(flights="HAT014")) == "'str' object has no attribute 'flight_number'"
    assert airline.err(
        "book_reservation", **booking(flights=[{"flight_number": "HAT014", "date": "2024-05-20"}, 7])
    ) == "'dict' object has no attribute 'flight_number'"
    assert airline.err("book_reservation", **booking(flights=[None])) == "'NoneType' object has no attribute 'flight_number'"
    # Raw passengers or payments fail the reservation record.
    assert airline.err("book_reservation", **booking(passengers=["Mei Hernandez"])).startswith(
        "1 validation error for Reservation\npassengers.0"
    )
    assert "validation error for Reservation" in airline.err("book_reservation", **booking(payment_methods={"a": 1}))
    # "", {} and [] are empty lists: a zero-passenger booking with no flights is valid.
    assert airline.ok("book_reservation", **booking(flights={}, passengers="", payment_methods=[]))["flights"] == []


def test_book_reservation_lookups_and_record_fields(airline: Session) -> None:
    assert airline.err("book_reservation", **booking(user_id="nobody")) == "User nobody not found"
    for field, value in (("cabin", "Economy"), ("insurance", "Yes"), ("flight_type", "round-trip"),
                         ("total_baggages", 1.5), ("nonfree_baggages", None), ("total_baggages", "one"),
                         ("origin", None), ("cabin", "first")):
        message = airline.err("book_reservation", **booking(**{field: value}))
        assert message.startswith("1 validation error for Reservation\n" + field), message
    assert unchanged(airline)


def test_book_reservation_flight_checks(airline: Session) -> None:
    flight = [{"flight_number": "HAT170", "date": "2024-05-15"}]
    assert airline.err("book_reservation", **booking(flights=flight)) == "Flight HAT170 not available on date 2024-05-15"
    flight = [{"flight_number": "HAT170", "date": "2024-05-31"}]
    assert airline.err("book_reservation", **booking(flights=flight)) == "Flight HAT170 not found on date 2024-05-31"
    flight = [{"flight_number": "HAT999", "date": "2024-05-20"}]
    assert airline.err("book_reservation", **booking(flights=flight)) == "Flight HAT999 not found"
    assert date_entry("HAT170", "2024-05-22")["available_seats"]["business"] == 0
    flight = [{"flight_number": "HAT170", "date": "2024-05-22"}]
    assert airline.err("book_reservation", **booking(flights=flight, cabin="business")) == (
        "Not enough seats on flight HAT170"
    )
    assert unchanged(airline)


def test_book_reservation_total_uses_the_raw_baggage_argument(airline: Session) -> None:
    price = date_entry("HAT014", "2024-05-20")["prices"]["economy"]
    assert airline.err("book_reservation", **booking(nonfree_baggages="0")) == (
        "unsupported operand type(s) for +=: 'int' and 'str'"
    )
    message = airline.err("book_reservation", **booking(nonfree_baggages=2.0))
    assert message == f"Payment amount does not add up, total price is {float(price + 100)}, but paid {price}"
    # An integral float total still equals an int payment sum; the record stores the coerced int.
    reservation = airline.ok("book_reservation", **booking(
        nonfree_baggages=2.0, payment_methods=[{"payment_id": CARD, "amount": price + 100}]))
    assert reservation["nonfree_baggages"] == 2 and isinstance(reservation["nonfree_baggages"], int)
    bool_bags = airline.ok("book_reservation", **booking(
        nonfree_baggages=True, payment_methods=[{"payment_id": CARD, "amount": price + 50}]))
    assert bool_bags["nonfree_baggages"] == 1


def test_book_reservation_payment_checks(airline: Session) -> None:
    price = date_entry("HAT014", "2024-05-20")["prices"]["economy"]
    assert airline.err("book_reservation", **booking(payment_methods=[{"payment_id": "gift_card_1", "amount": price}])) == (
        "Payment method gift_card_1 not found"
    )
    assert airline.err("book_reservation", **booking(payment_methods=[{"payment_id": GIFT, "amount": price}])) == (
        f"Not enough balance in payment method {GIFT}"
    )
    # Each entry is checked alone against the undeducted balance (98.0): 2 × 60 passes step 7.
    message = airline.err("book_reservation", **booking(
        payment_methods=[{"payment_id": GIFT, "amount": 60}, {"payment_id": GIFT, "amount": 60}]))
    assert message == f"Payment amount does not add up, total price is {price}, but paid 120"
    assert unchanged(airline)


def test_book_reservation_same_gift_card_twice_goes_negative(airline: Session) -> None:
    price = date_entry("HAT014", "2024-05-20")["prices"]["economy"]
    payments = [{"payment_id": GIFT, "amount": 90}, {"payment_id": GIFT, "amount": 50},
                {"payment_id": CARD, "amount": price - 140}]
    airline.ok("book_reservation", **booking(payment_methods=payments))
    assert airline.record("users", USER)["payment_methods"][GIFT]["amount"] == 98.0 - 90 - 50


def test_book_reservation_certificate_twice_fails_after_partial_writes(airline: Session) -> None:
    price = date_entry("HAT014", "2024-05-20")["prices"]["economy"]
    payments = [{"payment_id": GIFT, "amount": 20}, {"payment_id": CERT_A, "amount": 0},
                {"payment_id": CERT_A, "amount": 0}, {"payment_id": CARD, "amount": price - 20}]
    assert airline.err("book_reservation", **booking(payment_methods=payments)) == f"'{CERT_A}'"
    user = airline.record("users", USER)
    assert user["payment_methods"][GIFT]["amount"] == 78.0  # deducted before the failure, kept
    assert CERT_A not in user["payment_methods"]
    assert "HATHAT" not in airline.db["reservations"] and user["reservations"][-1] != "HATHAT"
    seats = airline.record("flights", "HAT014")["dates"]["2024-05-20"]["available_seats"]
    assert seats == date_entry("HAT014", "2024-05-20")["available_seats"]


def test_book_reservation_takes_seats_for_duplicate_flights(airline: Session) -> None:
    price = date_entry("HAT014", "2024-05-20")["prices"]["economy"]
    twice = [{"flight_number": "HAT014", "date": "2024-05-20"}] * 2
    airline.ok("book_reservation", **booking(flights=twice, payment_methods=[{"payment_id": CARD, "amount": 2 * price}]))
    seats = airline.record("flights", "HAT014")["dates"]["2024-05-20"]["available_seats"]["economy"]
    assert seats == date_entry("HAT014", "2024-05-20")["available_seats"]["economy"] - 2


# ------------------------------------------------------------------------------ cancel_reservation


def test_cancel_reservation_negates_every_entry_each_time(airline: Session) -> None:
    assert airline.err("cancel_reservation", reservation_id="NOPE00") == "Reservation NOPE00 not found"
    first = airline.ok("cancel_reservation", reservation_id="79G8A9")  # paid 1400 by gift card
    assert first["status"] == "cancelled"
    assert first["payment_history"] == [{"payment_id": GIFT, "amount": 1400}, {"payment_id": GIFT, "amount": -1400}]
    second = airline.ok("cancel_reservation", reservation_id="79G8A9")
    assert [entry["amount"] for entry in second["payment_history"]] == [1400, -1400, -1400, 1400]
    assert airline.record("users", USER)["payment_methods"][GIFT]["amount"] == 98.0  # no refund
    for segment in raw_db("airline")["reservations"]["79G8A9"]["flights"]:  # no seat release
        assert airline.record("flights", segment["flight_number"]) == flights()[segment["flight_number"]]
    assert airline.db.changed_records().keys() == {"reservations"}


# ---------------------------------------------------------------------------- update payment rule


def test_update_baggages_rules(airline: Session) -> None:
    assert airline.err("update_reservation_baggages", reservation_id=RES, total_baggages=3, nonfree_baggages=2,
                       payment_id=GIFT) == "Gift card balance is not enough"
    assert airline.err("update_reservation_baggages", reservation_id=RES, total_baggages=1, nonfree_baggages=0,
                       payment_id=CERT_A) == "Certificate cannot be used to update reservation"
    assert airline.err("update_reservation_baggages", reservation_id=RES, total_baggages=1, nonfree_baggages=0,
                       payment_id="credit_card_0") == "Payment method not found"
    assert airline.err("update_reservation_baggages", reservation_id="X", total_baggages=1, nonfree_baggages=0,
                       payment_id=CARD) == "Reservation X not found"
    for value, type_name in (("2", "str"), (None, "NoneType"), ([1], "list")):
        assert airline.err("update_reservation_baggages", reservation_id=RES, total_baggages=1,
                           nonfree_baggages=value, payment_id=CARD) == (
            f"unsupported operand type(s) for -: '{type_name}' and 'int'"
        )
    assert unchanged(airline)


def test_update_baggages_gift_card_and_float_counts(airline: Session) -> None:
    reservation = airline.ok("update_reservation_baggages", reservation_id=RES, total_baggages=2.0,
                             nonfree_baggages=1.0, payment_id=GIFT)
    assert reservation["payment_history"][-1] == {"payment_id": GIFT, "amount": 50}
    assert reservation["total_baggages"] == 2.0 and isinstance(reservation["total_baggages"], float)
    content = airline.call("get_reservation_details", {"reservation_id": RES}).content
    assert '"total_baggages": 2.0, "nonfree_baggages": 1.0,' in content
    assert airline.record("users", USER)["payment_methods"][GIFT]["amount"] == 48.0
    # The raw stored 1.0 is the current count next time: 3 − 1.0 → p = 100.0 → entry 100.
    reservation = airline.ok("update_reservation_baggages", reservation_id=RES, total_baggages=3,
                             nonfree_baggages=3, payment_id=CARD)
    assert reservation["payment_history"][-1] == {"payment_id": CARD, "amount": 100}
    # Decreases are not refunded and make no entry; any JSON value is stored as given.
    before = len(reservation["payment_history"])
    reservation = airline.ok("update_reservation_baggages", reservation_id=RES, total_baggages="2",
                             nonfree_baggages=-1.5, payment_id=CARD)
    assert len(reservation["payment_history"]) == before
    assert (reservation["total_baggages"], reservation["nonfree_baggages"]) == ("2", -1.5)


def test_update_baggages_certificate_rejected_even_for_zero(airline: Session) -> None:
    assert airline.err("update_reservation_baggages", reservation_id=RES, total_baggages=0, nonfree_baggages=0,
                       payment_id=CERT_B) == "Certificate cannot be used to update reservation"


def test_update_baggages_fractional_fee_debits_gift_card_then_fails(airline: Session) -> None:
    # chen_jackson_3290 owns 4WQ150 (no paid bags) and gift_card_3576581 with 245.0.
    fee = 50 * 2.3
    assert fee == 114.99999999999999
    message = airline.err("update_reservation_baggages", reservation_id="4WQ150", total_baggages=3,
                          nonfree_baggages=2.3, payment_id="gift_card_3576581")
    assert message.startswith("1 validation error for Payment\namount")
    methods = airline.record("users", "chen_jackson_3290")["payment_methods"]
    assert methods["gift_card_3576581"]["amount"] == 245.0 - fee  # debited before the failure, kept
    reservation = airline.record("reservations", "4WQ150")
    assert reservation == canonical_reservation(raw_db("airline")["reservations"]["4WQ150"])
    # With a credit card the same failure changes nothing.
    second = new_session("airline")
    second.err("update_reservation_baggages", reservation_id=RES, total_baggages=3, nonfree_baggages=2.3,
               payment_id=CARD)
    assert unchanged(second)


# ---------------------------------------------------------------------- update_reservation_flights


def test_update_flights_keeps_booked_prices_for_unchanged_segments(airline: Session) -> None:
    original = raw_db("airline")["reservations"][RES]
    same = [{"flight_number": s["flight_number"], "date": s["date"]} for s in original["flights"]]
    reservation = airline.ok("update_reservation_flights", reservation_id=RES, cabin="economy", flights=same,
                             payment_id=GIFT)
    assert reservation["payment_history"] == original["payment_history"]  # difference 0: no entry
    assert [s["price"] for s in reservation["flights"]] == [s["price"] for s in original["flights"]]
    assert airline.record("users", USER)["payment_methods"][GIFT]["amount"] == 98.0


def test_update_flights_reprices_on_cabin_change_without_touching_seats(airline: Session) -> None:
    original = raw_db("airline")["reservations"][RES]
    same = [{"flight_number": s["flight_number"], "date": s["date"]} for s in original["flights"]]
    new_prices = [date_entry(s["flight_number"], s["date"])["prices"]["business"] for s in original["flights"]]
    difference = (sum(new_prices) - sum(s["price"] for s in original["flights"])) * 2
    reservation = airline.ok("update_reservation_flights", reservation_id=RES, cabin="business", flights=same,
                             payment_id=CARD)
    assert [s["price"] for s in reservation["flights"]] == new_prices
    assert reservation["cabin"] == "business"
    assert reservation["payment_history"][-1] == {"payment_id": CARD, "amount": difference}
    assert airline.db.changed_records().keys() == {"reservations"}  # seats never change


def test_update_flights_empty_list_refunds_whole_fare(airline: Session) -> None:
    reservation = airline.ok("update_reservation_flights", reservation_id=RES, cabin=None, flights=[],
                             payment_id=GIFT)
    fare = sum(s["price"] for s in raw_db("airline")["reservations"][RES]["flights"]) * 2
    assert reservation["flights"] == [] and reservation["cabin"] is None
    assert reservation["payment_history"][-1] == {"payment_id": GIFT, "amount": -fare}
    assert airline.record("users", USER)["payment_methods"][GIFT]["amount"] == 98.0 + fare


def test_update_flights_errors(airline: Session) -> None:
    assert airline.err("update_reservation_flights", reservation_id="NOPE", cabin="economy", flights=None,
                       payment_id=CARD) == "'NoneType' object is not iterable"
    assert airline.err("update_reservation_flights", reservation_id="NOPE", cabin="economy", flights=[],
                       payment_id=CARD) == "Reservation NOPE not found"
    assert airline.err("update_reservation_flights", reservation_id=RES, cabin="economy", flights=["HAT070"],
                       payment_id=CARD) == "'str' object has no attribute 'flight_number'"
    new = [{"flight_number": "HAT014", "date": "2024-05-20"}]
    assert airline.err("update_reservation_flights", reservation_id=RES, cabin="Economy", flights=new,
                       payment_id=CARD) == "'Economy'"
    assert airline.err("update_reservation_flights", reservation_id=RES, cabin=None, flights=new,
                       payment_id=CARD) == "None"
    assert airline.err("update_reservation_flights", reservation_id=RES, cabin=["economy"], flights=new,
                       payment_id=CARD) == "unhashable type: 'list'"
    past = [{"flight_number": "HAT070", "date": "2024-05-15"}]
    assert airline.err("update_reservation_flights", reservation_id=RES, cabin="economy", flights=past,
                       payment_id=CARD) == "Flight HAT070 not available on date 2024-05-15"
    assert airline.err("update_reservation_flights", reservation_id=RES, cabin="economy", flights=new,
                       payment_id=CERT_A) == "Certificate cannot be used to update reservation"
    full = [{"flight_number": "HAT170", "date": "2024-05-22"}]
    assert airline.err("update_reservation_flights", reservation_id=RES, cabin="business", flights=full,
                       payment_id=CARD) == "Not enough seats on flight HAT170"
    assert unchanged(airline)


# ------------------------------------------------------------------- update_reservation_passengers


def test_update_passengers(airline: Session) -> None:
    new = [{"first_name": "A", "last_name": "B", "dob": "2000-01-01", "x": 1}, {"first_name": "C", "last_name": "D",
                                                                                  "dob": "2001-01-01"}]
    reservation = airline.ok("update_reservation_passengers", reservation_id=RES, passengers=new)
    assert reservation["passengers"] == [{"first_name": "A", "last_name": "B", "dob": "2000-01-01"},
                                         {"first_name": "C", "last_name": "D", "dob": "2001-01-01"}]
    assert airline.err("update_reservation_passengers", reservation_id=RES, passengers=new[:1]) == (
        "Number of passengers does not match"
    )
    assert airline.err("update_reservation_passengers", reservation_id="NOPE", passengers=None) == (
        "'NoneType' object is not iterable"
    )
    assert airline.err("update_reservation_passengers", reservation_id="NOPE", passengers=[{"first_name": 1}]).startswith(
        "3 validation errors for Passenger"
    )


def test_update_passengers_stores_raw_values(airline: Session) -> None:
    assert airline.ok("update_reservation_passengers", reservation_id=RES, passengers=["Kevin Smith", None])[
        "passengers"] == ["Kevin Smith", None]
    assert airline.ok("update_reservation_passengers", reservation_id=RES, passengers="KS")["passengers"] == "KS"
    assert airline.ok("update_reservation_passengers", reservation_id=RES, passengers={"a": 1, "b": 2})[
        "passengers"] == {"a": 1, "b": 2}
    assert '"passengers": {"a": 1, "b": 2}' in airline.call("get_reservation_details", {"reservation_id": RES}).content
    # Later tools only use the length: a cancellation still works.
    assert airline.ok("cancel_reservation", reservation_id=RES)["status"] == "cancelled"


# -------------------------------------------------------------------------------- send_certificate


def test_send_certificate(airline: Session) -> None:
    assert airline.call("send_certificate", {"user_id": USER, "amount": 100}).content == (
        f"Certificate certificate_3221322 added to user {USER} with amount 100."
    )
    assert airline.call("send_certificate", {"user_id": USER, "amount": "1e2"}).content == (
        f"Certificate certificate_3221323 added to user {USER} with amount 1e2."
    )
    assert airline.call("send_certificate", {"user_id": USER, "amount": True}).content == (
        f"Certificate certificate_3221324 added to user {USER} with amount True."
    )
    assert airline.err("send_certificate", user_id=USER, amount=5) == "Too many certificates"
    methods = airline.record("users", USER)["payment_methods"]
    assert list(methods)[-3:] == ["certificate_3221322", "certificate_3221323", "certificate_3221324"]
    assert methods["certificate_3221322"] == {"source": "certificate", "id": "certificate_3221322", "amount": 100.0}
    assert [methods[f"certificate_322132{n}"]["amount"] for n in (3, 4)] == [100.0, 1.0]
    content = airline.call("get_user_details", {"user_id": USER}).content
    assert '"certificate_3221322": {"source": "certificate", "id": "certificate_3221322", "amount": 100.0}' in content


def test_send_certificate_errors(airline: Session) -> None:
    assert airline.err("send_certificate", user_id="nobody", amount=1) == "User nobody not found"
    for amount in (None, "$100"):
        assert airline.err("send_certificate", user_id=USER, amount=amount).startswith("1 validation error for Certificate")
    assert airline.call("send_certificate", {"user_id": USER, "amount": " 100 "}).content.endswith("with amount  100 .")
    assert airline.record("users", USER)["payment_methods"]["certificate_3221322"]["amount"] == 100.0
