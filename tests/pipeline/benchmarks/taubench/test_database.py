"""Canonical form, DB hash and copy-on-write isolation (TOOLS.md §1)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.benchmarks.taubench import canonical_hash, changed_records, fresh_db, initial_db

from .conftest import ORDER_OPTIONAL, Session, canonical_reservation, gold_hashes, new_session, raw_db


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def file_canonical(domain: str) -> dict[str, Any]:
    """The file plus the null optional fields of §1.3, built with plain json."""
    db = json.loads(json.dumps(raw_db(domain)))
    if domain == "airline":
        for reservation in db["reservations"].values():
            reservation.setdefault("status", None)
    else:
        for order in db["orders"].values():
            for key in ORDER_OPTIONAL:
                order.setdefault(key, None)
    return db


def test_initial_hashes_match_the_contract_and_gold_file() -> None:
    for domain in ("airline", "retail"):
        expected = gold_hashes()[domain]["initial_hash"]
        assert sha(json.dumps(file_canonical(domain), sort_keys=True)) == expected
        assert fresh_db(domain).canonical_hash() == expected
        assert initial_db(domain).canonical_hash == expected
    assert gold_hashes()["airline"]["initial_hash"].startswith("124e39a664b5")
    assert gold_hashes()["retail"]["initial_hash"].startswith("b25c9cb211f5")


def test_canonical_text_is_json_dumps_sort_keys_of_the_whole_db() -> None:
    for domain in ("airline", "retail"):
        db = fresh_db(domain)
        assert db.canonical_text() == json.dumps(file_canonical(domain), sort_keys=True)
        assert db.to_dict() == file_canonical(domain)


def test_records_keep_file_order_and_model_field_order() -> None:
    db = fresh_db("airline")
    assert list(db["flights"])[:3] == list(raw_db("airline")["flights"])[:3]
    assert list(db["reservations"]) == list(raw_db("airline")["reservations"])
    flight = db["flights"]["HAT001"]
    assert list(flight)[:3] == ["flight_number", "origin", "destination"]
    reservation = db["reservations"]["4WQ150"]
    assert reservation == canonical_reservation(raw_db("airline")["reservations"]["4WQ150"])
    assert list(reservation) == list(canonical_reservation(raw_db("airline")["reservations"]["4WQ150"]))
    assert list(reservation["flights"][0]) == ["flight_number", "origin", "destination", "date", "price"]


def test_hash_after_changes_equals_full_dump(airline: Session, retail: Session) -> None:
    airline.ok("cancel_reservation", reservation_id="4WQ150")
    airline.ok("send_certificate", user_id="mia_li_3668", amount=100)
    retail.ok("cancel_pending_order", order_id=RETAIL_PENDING[0], reason="no longer needed")
    for session in (airline, retail):
        assert session.db.canonical_hash() == session.slow_hash()
        assert session.db.canonical_text() == json.dumps(session.db.to_dict(), sort_keys=True)
        assert session.db.canonical_hash() != gold_hashes()[session.db.domain]["initial_hash"]


def test_remembered_hashes_follow_every_change_of_a_record(airline: Session) -> None:
    """Hashes are remembered per database state: a state reached again reuses its hash, and a
    record changed again after hashing (same keys, new contents) is a new state."""
    airline.ok("update_reservation_baggages", reservation_id="4WQ150", total_baggages=6, nonfree_baggages=0,
               payment_id="gift_card_3576581")
    first = airline.db.canonical_hash()
    assert first == airline.slow_hash()
    airline.ok("update_reservation_baggages", reservation_id="4WQ150", total_baggages=7, nonfree_baggages=0,
               payment_id="gift_card_3576581")
    second = airline.db.canonical_hash()
    assert second == airline.slow_hash() and second != first
    again = new_session("airline")
    again.ok("update_reservation_baggages", reservation_id="4WQ150", total_baggages=6, nonfree_baggages=0,
             payment_id="gift_card_3576581")
    assert again.db.canonical_hash() == first == again.slow_hash()


def test_new_records_are_appended_and_sorted_into_the_hash(airline: Session) -> None:
    user = raw_db("airline")["users"]["mei_hernandez_8984"]
    flight = raw_db("airline")["flights"]["HAT014"]["dates"]["2024-05-20"]
    price = flight["prices"]["economy"]
    airline.ok(
        "book_reservation", user_id="mei_hernandez_8984", origin="JFK", destination="MIA",
        flight_type="one_way", cabin="economy", flights=[{"flight_number": "HAT014", "date": "2024-05-20"}],
        passengers=[{"first_name": "Mei", "last_name": "Hernandez", "dob": user["dob"]}],
        payment_methods=[{"payment_id": "credit_card_2140654", "amount": price}],
        total_baggages=0, nonfree_baggages=0, insurance="no",
    )
    assert list(airline.db["reservations"])[-1] == "HATHAT"
    assert len(airline.db["reservations"]) == len(raw_db("airline")["reservations"]) + 1
    assert airline.db.canonical_hash() == airline.slow_hash()
    changed = changed_records(airline.db)
    assert changed == airline.db.changed_records() and canonical_hash(airline.db) == airline.slow_hash()
    assert set(changed) == {"flights", "users", "reservations"}
    assert set(changed["reservations"]) == {"HATHAT"}
    assert changed["users"]["mei_hernandez_8984"]["reservations"][-1] == "HATHAT"
    assert changed["flights"]["HAT014"]["dates"]["2024-05-20"]["available_seats"]["economy"] == (
        flight["available_seats"]["economy"] - 1
    )


def test_changed_records_ignores_copies_that_did_not_change(airline: Session) -> None:
    assert airline.db.changed_records() == {}
    # A failing write may copy a record before failing; it is not a change.
    assert airline.err("update_reservation_baggages", reservation_id="4WQ150", total_baggages=5,
                       nonfree_baggages=0, payment_id="nope") == "Payment method not found"
    assert airline.db.changed_records() == {}
    assert airline.db.canonical_hash() == gold_hashes()["airline"]["initial_hash"]


def test_episodes_are_isolated_and_the_initial_db_never_changes() -> None:
    first, second = new_session("airline"), new_session("airline")
    first.ok("cancel_reservation", reservation_id="4WQ150")
    first.ok("send_certificate", user_id="chen_jackson_3290", amount=50)
    assert second.ok("get_reservation_details", reservation_id="4WQ150")["status"] is None
    assert "certificate_3221322" not in second.ok("get_user_details", user_id="chen_jackson_3290")["payment_methods"]
    assert second.db.canonical_hash() == gold_hashes()["airline"]["initial_hash"]
    third = new_session("airline")
    assert third.db.canonical_hash() == gold_hashes()["airline"]["initial_hash"]
    # The shared initial records themselves are untouched (a fresh full dump, no caches).
    records = {name: table.records for name, table in initial_db("airline").tables.items()}
    assert sha(json.dumps(records, sort_keys=True)) == gold_hashes()["airline"]["initial_hash"]


# Write calls that succeed or fail on purpose; any sequence of them must keep fast == slow hash.
AIRLINE_WRITES = [
    ("cancel_reservation", {"reservation_id": "4WQ150"}),
    ("cancel_reservation", {"reservation_id": "NO6JO3"}),
    ("send_certificate", {"user_id": "mia_li_3668", "amount": 150}),
    ("send_certificate", {"user_id": "chen_jackson_3290", "amount": "12.5"}),
    ("update_reservation_baggages", {"reservation_id": "4WQ150", "total_baggages": 6, "nonfree_baggages": 1,
                                     "payment_id": "gift_card_3576581"}),
    ("update_reservation_baggages", {"reservation_id": "4WQ150", "total_baggages": 2.0, "nonfree_baggages": 3.0,
                                     "payment_id": "gift_card_3576581"}),
    ("update_reservation_passengers", {"reservation_id": "4WQ150", "passengers": "abc"}),
    ("update_reservation_flights", {"reservation_id": "4WQ150", "cabin": "business", "flights": [],
                                    "payment_id": "gift_card_3576581"}),
    ("book_reservation", {"user_id": "mia_li_3668", "origin": "A", "destination": "B", "flight_type": "one_way",
                          "cabin": "economy", "flights": [], "passengers": [], "payment_methods": [],
                          "total_baggages": 0, "nonfree_baggages": 0, "insurance": "no"}),
]
RETAIL_PENDING = [key for key, order in raw_db("retail")["orders"].items() if order["status"] == "pending"][:3]
RETAIL_WRITES = [
    *[("cancel_pending_order", {"order_id": order_id, "reason": "ordered by mistake"}) for order_id in RETAIL_PENDING],
    *[("modify_pending_order_items", {"order_id": order_id, "item_ids": [], "new_item_ids": [],
                                      "payment_method_id": raw_db("retail")["orders"][order_id]["payment_history"][0][
                                          "payment_method_id"]}) for order_id in RETAIL_PENDING],
    ("modify_user_address", {"user_id": "noah_brown_6181", "address1": "1 Main St", "address2": "", "city": "X",
                             "state": "CA", "country": "USA", "zip": "00001"}),
]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    airline_calls=st.lists(st.sampled_from(AIRLINE_WRITES), max_size=6),
    retail_calls=st.lists(st.sampled_from(RETAIL_WRITES), max_size=6),
)
def test_fast_hash_equals_full_dump_after_any_write_sequence(
    airline_calls: list[tuple[str, dict[str, Any]]], retail_calls: list[tuple[str, dict[str, Any]]]
) -> None:
    for domain, calls in (("airline", airline_calls), ("retail", retail_calls)):
        session = new_session(domain)
        for name, arguments in calls:
            session.call(name, arguments)
        assert session.db.canonical_hash() == session.slow_hash()
        changed = session.db.changed_records()
        initial = initial_db(domain).tables
        for collection, records in session.live_records().items():
            original = initial[collection].records
            differing = {
                key for key, record in records.items()
                if record is not original.get(key) and json.dumps(original.get(key)) != json.dumps(record)
            }
            assert differing == set(changed.get(collection, {}))
    assert fresh_db("airline").canonical_hash() == gold_hashes()["airline"]["initial_hash"]
    assert fresh_db("retail").canonical_hash() == gold_hashes()["retail"]["initial_hash"]


def test_the_canonical_database_is_validated_once_per_machine(tmp_path, monkeypatch) -> None:
    """A new process (here: the process cache emptied) reads the canonical records from the machine's
    cache instead of validating the file again, and gets the same database, hash and order."""
    from pipeline.benchmarks.taubench import data, domains

    monkeypatch.setenv("FLOWSTATE_CACHE", str(tmp_path))
    monkeypatch.setattr(data, "_parsed", {})
    built = initial_db("airline")
    assert len(list(tmp_path.glob("taubench/airline-*.json"))) == 1

    monkeypatch.setattr(data, "_parsed", {})
    monkeypatch.setattr(domains, "canonical_tables", lambda *_: pytest.fail("validated the file again"))
    read_back = initial_db("airline")
    assert read_back is not built
    assert read_back.canonical_hash == built.canonical_hash == gold_hashes()["airline"]["initial_hash"]
    assert {n: t.records for n, t in read_back.tables.items()} == {n: t.records for n, t in built.tables.items()}
    assert list(read_back.tables["reservations"].records) == list(raw_db("airline")["reservations"])


def test_a_change_of_the_record_models_is_a_new_cache_key(monkeypatch) -> None:
    from pipeline.benchmarks.taubench import domains

    models = domains.SPECS["retail"].models
    before = domains._code_fingerprint(models)
    monkeypatch.setattr(domains.pydantic, "VERSION", "0.0.0")
    assert domains._code_fingerprint(models) != before
