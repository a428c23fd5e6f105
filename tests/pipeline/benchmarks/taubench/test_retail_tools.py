"""Retail tools (TOOLS.md §3, §5): success paths, every error path, typing and quirks."""

from __future__ import annotations

import json
from typing import Any

from .conftest import Session, canonical_order, gold_hashes, raw_db

PENDING = "#W9728773"  # omar_silva_7446, paid 1412.7 with gift_card_5540683 (balance 68.0)
PENDING_USER, PENDING_GIFT = "omar_silva_7446", "gift_card_5540683"
PAYPAL, OMAR_CARD = "paypal_2192303", "credit_card_5322562"
DELIVERED = "#W3113816"  # emma_santos_9753, paid by credit_card_5869505; gift_card_6023546 has 36.0
DELIVERED_CARD, DELIVERED_GIFT = "credit_card_5869505", "gift_card_6023546"
DUPLICATES = "#W9093821"  # pending, item 3557711149 twice, paid by credit_card_7422485
PROCESSED, CANCELLED = "#W2611340", "#W3220387"
ADDRESS = {"address1": "1 Main St", "address2": "Apt 2", "city": "Austin", "state": "TX", "country": "USA",
           "zip": "78701"}


def orders() -> dict[str, Any]:
    return raw_db("retail")["orders"]


def product_of(order_id: str, item_id: str) -> dict[str, Any]:
    item = next(item for item in orders()[order_id]["items"] if item["item_id"] == item_id)
    return raw_db("retail")["products"][item["product_id"]]


def variant(order_id: str, item_id: str, *, available: bool, skip: int = 0) -> dict[str, Any]:
    """A variant of the item's product other than the item itself."""
    candidates = [v for v in product_of(order_id, item_id)["variants"].values()
                  if v["available"] is available and v["item_id"] != item_id]
    return candidates[skip]


def dearer_pairs(order_id: str, margin: float) -> list[tuple[str, str]]:
    """(item, available variant) pairs of the order whose price rises by more than ``margin``."""
    return [
        (item["item_id"], candidate["item_id"])
        for item in orders()[order_id]["items"]
        for candidate in raw_db("retail")["products"][item["product_id"]]["variants"].values()
        if candidate["available"] and candidate["price"] - item["price"] > margin
    ]


def unchanged(session: Session) -> bool:
    return session.db.canonical_hash() == gold_hashes()["retail"]["initial_hash"]


def item_price(order_id: str, item_id: str) -> float:
    return next(item["price"] for item in orders()[order_id]["items"] if item["item_id"] == item_id)


# ---------------------------------------------------------------------------------------- reads


def test_find_user_id_by_email(retail: Session) -> None:
    assert retail.call("find_user_id_by_email", {"email": "Omar.Silva4147@EXAMPLE.com"}).content == PENDING_USER
    assert retail.err("find_user_id_by_email", email="nobody@example.com") == "User not found"
    assert retail.err("find_user_id_by_email", email=None) == "'NoneType' object has no attribute 'lower'"
    assert retail.err("find_user_id_by_email", email=7) == "'int' object has no attribute 'lower'"


def test_find_user_id_by_name_zip(retail: Session) -> None:
    expected = next(
        uid for uid, user in raw_db("retail")["users"].items()
        if user["name"]["first_name"].lower() == "omar" and user["name"]["last_name"].lower() == "silva"
        and user["address"]["zip"] == "92107"
    )
    found = retail.call("find_user_id_by_name_zip", {"first_name": "OMAR", "last_name": "silva", "zip": "92107"})
    assert found.content == expected
    assert retail.err("find_user_id_by_name_zip", first_name="Omar", last_name="Silva", zip=92107) == "User not found"
    assert retail.err("find_user_id_by_name_zip", first_name=None, last_name="Silva", zip="92107") == (
        "'NoneType' object has no attribute 'lower'"
    )
    # A non-string last name only fails at a user whose first name matches.
    assert retail.err("find_user_id_by_name_zip", first_name="Zzzz", last_name=None, zip="92107") == "User not found"
    assert retail.err("find_user_id_by_name_zip", first_name="Omar", last_name=3, zip="92107") == (
        "'int' object has no attribute 'lower'"
    )


def test_lookups(retail: Session) -> None:
    order = retail.ok("get_order_details", order_id=PENDING)
    assert order == canonical_order(orders()[PENDING])
    assert list(order)[-7:] == ["cancel_reason", "exchange_items", "exchange_new_items", "exchange_payment_method_id",
                                "exchange_price_difference", "return_items", "return_payment_method_id"]
    assert retail.call("get_order_details", {"order_id": PENDING}).content.endswith(
        '"cancel_reason": null, "exchange_items": null, "exchange_new_items": null, "exchange_payment_method_id": '
        'null, "exchange_price_difference": null, "return_items": null, "return_payment_method_id": null}'
    )
    assert retail.err("get_order_details", order_id="W9728773") == "Order not found"
    assert retail.err("get_order_details", order_id=["#W9728773"]) == "unhashable type: 'list'"
    assert retail.ok("get_user_details", user_id=PENDING_USER) == raw_db("retail")["users"][PENDING_USER]
    assert retail.err("get_user_details", user_id=None) == "User not found"
    product = raw_db("retail")["products"]["1656367028"]
    assert retail.ok("get_product_details", product_id="1656367028") == product
    assert retail.err("get_product_details", product_id=1656367028) == "Product not found"
    assert retail.err("get_product_details", product_id={"a": 1}) == "unhashable type: 'dict'"
    assert retail.ok("get_item_details", item_id="4843487907") == product["variants"]["4843487907"]
    assert retail.call("get_item_details", {"item_id": "4843487907"}).content.startswith(
        '{"item_id": "4843487907", "options": {"switch type": "clicky", '
    )
    assert retail.err("get_item_details", item_id="1656367028") == "Item not found"
    assert retail.err("get_item_details", item_id=["x"]) == "unhashable type: 'list'"


def test_list_all_product_types(retail: Session) -> None:
    content = retail.call("list_all_product_types", {}).content
    products = raw_db("retail")["products"].values()
    assert content == json.dumps({p["name"]: p["product_id"] for p in products}, sort_keys=True)
    assert content.startswith('{"Action Camera": "3377618313", "Air Purifier": "3821016478", ')
    assert len(json.loads(content)) == 50


# ----------------------------------------------------------------------------- cancel_pending_order


def test_cancel_pending_order_refunds_gift_card_immediately(retail: Session) -> None:
    order = retail.ok("cancel_pending_order", order_id=PENDING, reason="no longer needed")
    assert order["status"] == "cancelled" and order["cancel_reason"] == "no longer needed"
    assert order["payment_history"][-1] == {"transaction_type": "refund", "amount": 1412.7,
                                            "payment_method_id": PENDING_GIFT}
    assert retail.record("users", PENDING_USER)["payment_methods"][PENDING_GIFT]["balance"] == round(68.0 + 1412.7, 2)
    assert retail.err("cancel_pending_order", order_id=PENDING, reason="no longer needed") == (
        "Non-pending order cannot be cancelled"
    )


def test_cancel_pending_order_errors(retail: Session) -> None:
    assert retail.err("cancel_pending_order", order_id="#W0", reason="ordered by mistake") == "Order not found"
    assert retail.err("cancel_pending_order", order_id=PROCESSED, reason="ordered by mistake") == (
        "Non-pending order cannot be cancelled"
    )
    assert retail.err("cancel_pending_order", order_id=PENDING, reason="No longer needed") == "Invalid reason"
    assert retail.err("cancel_pending_order", order_id=PENDING, reason=None) == "Invalid reason"
    assert retail.err("cancel_pending_order", order_id=PENDING, reason=["no longer needed"]) == "unhashable type: 'list'"
    assert retail.err("cancel_pending_order", order_id=PENDING, reason={}) == "unhashable type: 'dict'"
    assert unchanged(retail)


def test_cancel_after_payment_change_refunds_all_three_entries(retail: Session) -> None:
    retail.ok("modify_pending_order_payment", order_id=PENDING, payment_method_id=OMAR_CARD)
    order = retail.ok("cancel_pending_order", order_id=PENDING, reason="ordered by mistake")
    history = order["payment_history"]
    assert len(history) == 6
    assert history[3:] == [{**entry, "transaction_type": "refund"} for entry in history[:3]]
    # The gift card is credited by the payment change, then by the refunds of entries 1 and 3.
    balance = round(round(round(68.0 + 1412.7, 2) + 1412.7, 2) + 1412.7, 2)
    assert retail.record("users", PENDING_USER)["payment_methods"][PENDING_GIFT]["balance"] == balance


# ------------------------------------------------------------------------ modify_pending_order_address


def test_modify_pending_order_address(retail: Session) -> None:
    order = retail.ok("modify_pending_order_address", order_id=PENDING, **ADDRESS)
    assert order["address"] == {"address1": "1 Main St", "address2": "Apt 2", "city": "Austin", "country": "USA",
                                "state": "TX", "zip": "78701"}
    assert list(order["address"]) == ["address1", "address2", "city", "country", "state", "zip"]
    assert retail.record("users", PENDING_USER)["address"] == raw_db("retail")["users"][PENDING_USER]["address"]
    assert retail.err("modify_pending_order_address", order_id=PROCESSED, **ADDRESS) == "Non-pending order cannot be modified"
    assert retail.err("modify_pending_order_address", order_id="#W1", **ADDRESS) == "Order not found"
    assert retail.err("modify_pending_order_address", order_id=PENDING, **{**ADDRESS, "address2": None}).startswith(
        "1 validation error for Address\naddress2"
    )
    assert "validation error" in retail.err("modify_pending_order_address", order_id=PENDING, **{**ADDRESS, "zip": 78701})


def test_address_change_allowed_for_modified_pending_order(retail: Session) -> None:
    retail.ok("modify_pending_order_items", order_id=PENDING, item_ids=[], new_item_ids=[], payment_method_id=OMAR_CARD)
    assert retail.ok("modify_pending_order_address", order_id=PENDING, **ADDRESS)["status"] == "pending (item modified)"


def test_modify_user_address(retail: Session) -> None:
    user = retail.ok("modify_user_address", user_id=PENDING_USER, **ADDRESS)
    assert user["address"]["city"] == "Austin"
    assert retail.record("orders", PENDING)["address"] == orders()[PENDING]["address"]
    assert retail.err("modify_user_address", user_id="nobody", **ADDRESS) == "User not found"
    assert "validation error" in retail.err("modify_user_address", user_id=PENDING_USER, **{**ADDRESS, "city": 1})


# -------------------------------------------------------------------------- modify_pending_order_items


def test_modify_items_single_pair(retail: Session) -> None:
    new = variant(PENDING, "7127170374", available=True)
    diff = new["price"] - 52.03
    order = retail.ok("modify_pending_order_items", order_id=PENDING, item_ids=["7127170374"],
                      new_item_ids=[new["item_id"]], payment_method_id=OMAR_CARD)
    assert order["status"] == "pending (item modified)"
    assert order["payment_history"][-1] == {"transaction_type": "payment" if diff > 0 else "refund",
                                            "amount": abs(diff), "payment_method_id": OMAR_CARD}
    modified = order["items"][0]
    assert modified == {"name": "Jigsaw Puzzle", "product_id": "1808611083", "item_id": new["item_id"],
                        "price": new["price"], "options": new["options"]}
    assert retail.err("modify_pending_order_items", order_id=PENDING, item_ids=[], new_item_ids=[],
                      payment_method_id=OMAR_CARD) == "Non-pending order cannot be modified"
    assert retail.err("cancel_pending_order", order_id=PENDING, reason="ordered by mistake") == (
        "Non-pending order cannot be cancelled"
    )


def test_modify_items_amount_is_unrounded_and_gift_card_rounded(retail: Session) -> None:
    old_ids = ["7127170374", "5645314103"]
    new = [variant(PENDING, old_ids[0], available=True), variant(PENDING, old_ids[1], available=True, skip=1)]
    diff = 0
    for old_id, replacement in zip(old_ids, new, strict=True):
        diff += replacement["price"] - item_price(PENDING, old_id)
    assert diff <= 68.0
    order = retail.ok("modify_pending_order_items", order_id=PENDING, item_ids=old_ids,
                      new_item_ids=[v["item_id"] for v in new], payment_method_id=PENDING_GIFT)
    assert order["payment_history"][-1]["amount"] == abs(diff)
    assert retail.record("users", PENDING_USER)["payment_methods"][PENDING_GIFT]["balance"] == round(68.0 - diff, 2)
    # Quirk: every modified item gets the price and options of the last pair's variant.
    first, last = order["items"][0], order["items"][4]
    assert (first["item_id"], last["item_id"]) == (new[0]["item_id"], new[1]["item_id"])
    assert first["price"] == last["price"] == new[1]["price"]
    assert first["options"] == last["options"] == new[1]["options"]


def test_modify_items_duplicates_map_to_successive_copies(retail: Session) -> None:
    a, b = variant(DUPLICATES, "3557711149", available=True), variant(DUPLICATES, "3557711149", available=True, skip=1)
    order = retail.ok("modify_pending_order_items", order_id=DUPLICATES, item_ids=["3557711149", "3557711149"],
                      new_item_ids=[a["item_id"], b["item_id"]], payment_method_id="credit_card_7422485")
    assert [order["items"][0]["item_id"], order["items"][2]["item_id"]] == [a["item_id"], b["item_id"]]
    expected = (a["price"] - 205.35) + (b["price"] - 205.35)
    assert order["payment_history"][-1]["amount"] == abs(expected)


def test_modify_items_errors(retail: Session) -> None:
    card = OMAR_CARD
    unavailable = variant(PENDING, "7127170374", available=False)
    available = variant(PENDING, "7127170374", available=True)
    cases = [
        (dict(item_ids=["7127170374", "7127170374"], new_item_ids=["1", "2"]), "7127170374 not found"),
        (dict(item_ids=[9747045638], new_item_ids=["1"]), "9747045638 not found"),
        (dict(item_ids="7127170374", new_item_ids=["1"]), "7 not found"),
        (dict(item_ids=["7127170374"], new_item_ids=[]), "The number of items to be exchanged should match"),
        (dict(item_ids=["7127170374"], new_item_ids=None), "object of type 'NoneType' has no len()"),
        (dict(item_ids=None, new_item_ids=[]), "'NoneType' object is not iterable"),
        (dict(item_ids=["7127170374"], new_item_ids=["7127170374"]), "The new item id should be different from the old item id"),
        (dict(item_ids=["7127170374"], new_item_ids=["4843487907"]), "Variant not found"),
        (dict(item_ids=["7127170374"], new_item_ids=[4068787148]), "Variant not found"),
        (dict(item_ids=["7127170374"], new_item_ids=[unavailable["item_id"]]),
         f"New item {unavailable['item_id']} not found or available"),
    ]
    for arguments, message in cases:
        assert retail.err("modify_pending_order_items", order_id=PENDING, payment_method_id=card, **arguments) == message
    assert retail.err("modify_pending_order_items", order_id=PENDING, item_ids=["7127170374"],
                      new_item_ids=[available["item_id"]], payment_method_id="paypal_0") == "Payment method not found"
    assert retail.err("modify_pending_order_items", order_id=PROCESSED, item_ids=[], new_item_ids=[],
                      payment_method_id=card) == "Non-pending order cannot be modified"
    assert unchanged(retail)


def test_modify_items_gift_card_balance(retail: Session) -> None:
    users = raw_db("retail")["users"]
    order_id, gift_id, old_id, new_id = next(
        (key, method_id, *pair)
        for key, order in orders().items()
        if order["status"] == "pending"
        for method_id, method in users[order["user_id"]]["payment_methods"].items()
        if method["source"] == "gift_card"
        for pair in [next(iter(dearer_pairs(key, method["balance"])), None)]
        if pair is not None
    )
    assert retail.err("modify_pending_order_items", order_id=order_id, item_ids=[old_id],
                      new_item_ids=[new_id], payment_method_id=gift_id) == (
        "Insufficient gift card balance to pay for the new item"
    )


def test_modify_items_empty_lists_append_zero_refund(retail: Session) -> None:
    order = retail.ok("modify_pending_order_items", order_id=PENDING, item_ids="", new_item_ids=[],
                      payment_method_id=PAYPAL)
    assert order["payment_history"][-1] == {"transaction_type": "refund", "amount": 0.0, "payment_method_id": PAYPAL}
    assert '"amount": 0.0, "payment_method_id": "paypal_2192303"}' in retail.call(
        "get_order_details", {"order_id": PENDING}).content
    assert order["status"] == "pending (item modified)"


# ------------------------------------------------------------------------ modify_pending_order_payment


def test_modify_payment(retail: Session) -> None:
    order = retail.ok("modify_pending_order_payment", order_id=PENDING, payment_method_id=OMAR_CARD)
    assert order["payment_history"][1:] == [
        {"transaction_type": "payment", "amount": 1412.7, "payment_method_id": OMAR_CARD},
        {"transaction_type": "refund", "amount": 1412.7, "payment_method_id": PENDING_GIFT},
    ]
    assert order["status"] == "pending"
    assert retail.record("users", PENDING_USER)["payment_methods"][PENDING_GIFT]["balance"] == round(68.0 + 1412.7, 2)
    assert retail.err("modify_pending_order_payment", order_id=PENDING, payment_method_id=PAYPAL) == (
        "There should be exactly one payment for a pending order"
    )


def test_modify_payment_errors(retail: Session) -> None:
    assert retail.err("modify_pending_order_payment", order_id=PENDING, payment_method_id=PENDING_GIFT) == (
        "The new payment method should be different from the current one"
    )
    assert retail.err("modify_pending_order_payment", order_id=PENDING, payment_method_id="paypal_1") == (
        "Payment method not found"
    )
    assert retail.err("modify_pending_order_payment", order_id=CANCELLED, payment_method_id="x") == (
        "Non-pending order cannot be modified"
    )
    assert retail.err("modify_pending_order_payment", order_id=PENDING, payment_method_id=[PAYPAL]) == (
        "unhashable type: 'list'"
    )
    assert unchanged(retail)


def test_modify_payment_to_a_gift_card_needs_its_balance(retail: Session) -> None:
    users = raw_db("retail")["users"]
    order_id, gift_id = next(
        (key, method_id)
        for key, order in orders().items()
        if order["status"] == "pending"
        for method_id, method in users[order["user_id"]]["payment_methods"].items()
        if method["source"] == "gift_card" and method["balance"] < order["payment_history"][0]["amount"]
        and method_id != order["payment_history"][0]["payment_method_id"]
    )
    assert retail.err("modify_pending_order_payment", order_id=order_id, payment_method_id=gift_id) == (
        "Insufficient gift card balance to pay for the order"
    )
    assert unchanged(retail)


# ------------------------------------------------------------------------ return_delivered_order_items


def test_return_delivered_items(retail: Session) -> None:
    order = retail.ok("return_delivered_order_items", order_id=DELIVERED, item_ids=["6243148452", "2206116040"],
                      payment_method_id=DELIVERED_CARD)
    assert order["status"] == "return requested"
    assert order["return_items"] == ["2206116040", "6243148452"]
    assert order["return_payment_method_id"] == DELIVERED_CARD
    assert order["payment_history"] == orders()[DELIVERED]["payment_history"]
    assert retail.db.changed_records().keys() == {"orders"}


def test_return_accepts_any_gift_card_and_empty_lists(retail: Session) -> None:
    order = retail.ok("return_delivered_order_items", order_id=DELIVERED, item_ids=[], payment_method_id=DELIVERED_GIFT)
    assert order["return_items"] == [] and order["return_payment_method_id"] == DELIVERED_GIFT


def test_return_errors(retail: Session) -> None:
    assert retail.err("return_delivered_order_items", order_id=PENDING, item_ids=[], payment_method_id=OMAR_CARD) == (
        "Non-delivered order cannot be returned"
    )
    # The payment method is checked before the items.
    assert retail.err("return_delivered_order_items", order_id=DELIVERED, item_ids=["nope"],
                      payment_method_id="credit_card_0") == "Payment method not found"
    assert retail.err("return_delivered_order_items", order_id=DELIVERED, item_ids=["6243148452"],
                      payment_method_id=PAYPAL) == "Payment method not found"
    assert retail.err("return_delivered_order_items", order_id=DELIVERED, item_ids=["6243148452", "6243148452"],
                      payment_method_id=DELIVERED_CARD) == "Some item not found"
    assert retail.err("return_delivered_order_items", order_id=DELIVERED, item_ids=[6243148452],
                      payment_method_id=DELIVERED_CARD) == "Some item not found"
    assert unchanged(retail)


def test_return_requires_original_method_unless_gift_card(retail: Session) -> None:
    order_id, order = next(
        (key, order) for key, order in orders().items()
        if order["status"] == "delivered" and len(raw_db("retail")["users"][order["user_id"]]["payment_methods"]) > 1
        and any(not pm.startswith("gift_card") and pm != order["payment_history"][0]["payment_method_id"]
                for pm in raw_db("retail")["users"][order["user_id"]]["payment_methods"])
    )
    other = next(pm for pm in raw_db("retail")["users"][order["user_id"]]["payment_methods"]
                 if not pm.startswith("gift_card") and pm != order["payment_history"][0]["payment_method_id"])
    assert retail.err("return_delivered_order_items", order_id=order_id, item_ids=[], payment_method_id=other) == (
        "Payment method should be the original payment method"
    )


# ---------------------------------------------------------------------- exchange_delivered_order_items


def test_exchange_delivered_items(retail: Session) -> None:
    new = variant(DELIVERED, "4843487907", available=True)
    same = "6243148452"
    assert product_of(DELIVERED, same)["variants"][same]["available"]
    order = retail.ok("exchange_delivered_order_items", order_id=DELIVERED, item_ids=["6243148452", "4843487907"],
                      new_item_ids=[same, new["item_id"]], payment_method_id=DELIVERED_GIFT)
    diff = 0
    diff += product_of(DELIVERED, same)["variants"][same]["price"] - 247.0
    diff += new["price"] - 254.84
    assert diff <= 36.0
    assert order["status"] == "exchange requested"
    assert order["exchange_items"] == ["4843487907", "6243148452"]
    assert order["exchange_new_items"] == sorted([same, new["item_id"]])
    assert order["exchange_payment_method_id"] == DELIVERED_GIFT
    assert order["exchange_price_difference"] == round(diff, 2)
    assert order["payment_history"] == orders()[DELIVERED]["payment_history"]
    assert retail.record("users", "emma_santos_9753")["payment_methods"][DELIVERED_GIFT]["balance"] == 36.0


def test_exchange_empty_lists_store_int_zero(retail: Session) -> None:
    retail.ok("exchange_delivered_order_items", order_id=DELIVERED, item_ids="", new_item_ids={},
              payment_method_id=DELIVERED_CARD)
    content = retail.call("get_order_details", {"order_id": DELIVERED}).content
    assert '"exchange_items": [], "exchange_new_items": [], "exchange_payment_method_id": "credit_card_5869505", ' \
           '"exchange_price_difference": 0, ' in content


def test_exchange_errors(retail: Session) -> None:
    card = DELIVERED_CARD
    unavailable = variant(DELIVERED, "2206116040", available=False)
    cases = [
        (dict(item_ids=["2206116040", "2206116040"], new_item_ids=["1", "2"]), "Number of 2206116040 not found."),
        (dict(item_ids=[4843487907], new_item_ids=["1"]), "Number of 4843487907 not found."),
        (dict(item_ids="4843487907", new_item_ids=["1"]), "Number of 4 not found."),
        (dict(item_ids=[], new_item_ids="ab"), "The number of items to be exchanged should match."),
        (dict(item_ids=["2206116040"], new_item_ids=["4843487907"]), "Variant not found"),
        (dict(item_ids=["4843487907"], new_item_ids=["4843487907"]), "New item 4843487907 not found or available"),
        (dict(item_ids=["2206116040"], new_item_ids=[unavailable["item_id"]]),
         f"New item {unavailable['item_id']} not found or available"),
        # Items are checked before the payment method.
        (dict(item_ids=["nope"], new_item_ids=["x"], payment_method_id="paypal_0"), "Number of nope not found."),
        (dict(item_ids=[], new_item_ids=[], payment_method_id="paypal_0"), "Payment method not found"),
    ]
    for arguments, message in cases:
        arguments = {"payment_method_id": card, **arguments}
        assert retail.err("exchange_delivered_order_items", order_id=DELIVERED, **arguments) == message
    assert retail.err("exchange_delivered_order_items", order_id=PENDING, item_ids=[], new_item_ids=[],
                      payment_method_id=card) == "Non-delivered order cannot be exchanged"
    old_id, new_id = dearer_pairs(DELIVERED, 36.0)[0]
    assert retail.err("exchange_delivered_order_items", order_id=DELIVERED, item_ids=[old_id],
                      new_item_ids=[new_id], payment_method_id=DELIVERED_GIFT) == (
        "Insufficient gift card balance to pay for the price difference"
    )
    assert unchanged(retail)


def test_calculate_and_transfer_are_shared(retail: Session) -> None:
    assert retail.call("calculate", {"expression": "(1412.7 - 68) / 2"}).content == str(round((1412.7 - 68) / 2, 2))
    assert retail.call("transfer_to_human_agents", {"summary": PENDING}).content == "Transfer successful"
    assert unchanged(retail)
