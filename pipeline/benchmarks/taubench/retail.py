"""The 16 retail tools (TOOLS.md §5), step for step in upstream's order.

As in the airline domain, checks and writes follow the documented order with plain Python
operations on the raw arguments (``item_ids.count(…)``, ``sorted(…)``, ``in`` on dicts), so
wrong argument types fail with Python's own messages at the same point. Retail lookup messages
carry no id. Records are copied into the episode just before they are first written.
"""

from __future__ import annotations

import json
from typing import Any

from pipeline.benchmarks.taubench.database import Record, Table
from pipeline.benchmarks.taubench.retail_models import Address, OrderPayment
from pipeline.benchmarks.taubench.toolkit import ToolKit, table, tool

CANCEL_REASONS = {"no longer needed", "ordered by mistake"}


class RetailTools(ToolKit):
    products: Table = table("products")
    users: Table = table("users")
    orders: Table = table("orders")

    def _order(self, order_id: Any) -> Record:
        return self._lookup("orders", order_id, "Order not found")

    def _order_in_status(self, order_id: Any, status: str, wrong_status: str) -> Record:
        """Order lookup, then an exact status check."""
        order = self._order(order_id)
        if order["status"] != status:
            raise ValueError(wrong_status)
        return order

    def _user(self, user_id: Any) -> Record:
        return self._lookup("users", user_id, "User not found")

    def _product(self, product_id: Any) -> Record:
        return self._lookup("products", product_id, "Product not found")

    def _variant(self, product_id: Any, item_id: Any) -> Record:
        variants = self._product(product_id)["variants"]
        if item_id not in variants:
            raise ValueError("Variant not found")
        return variants[item_id]

    def _payment_method(self, user_id: Any, payment_method_id: Any) -> Record:
        methods = self._user(user_id)["payment_methods"]
        if payment_method_id not in methods:
            raise ValueError("Payment method not found")
        return methods[payment_method_id]

    def _add_to_gift_card(self, user_id: str, payment_method_id: str, amount: Any) -> None:
        """``balance = round(balance + amount, 2)`` on a gift card (negative amounts debit)."""
        card = self.users.for_update(user_id)["payment_methods"][payment_method_id]
        card["balance"] = round(card["balance"] + amount, 2)

    @staticmethod
    def _count_check(order: Record, item_ids: Any, message: str) -> None:
        """Each listed id may occur at most as often as among the order's items."""
        order_item_ids = [item["item_id"] for item in order["items"]]
        for item_id in item_ids:
            if item_ids.count(item_id) > order_item_ids.count(item_id):
                raise ValueError(message.format(item_id=item_id))

    def _price_pairs(
        self, order: Record, item_ids: Any, new_item_ids: Any, *, count_error: str, length_error: str, distinct: bool
    ) -> tuple[Any, Record | None]:
        """Steps shared by exchanges and item modifications (their error texts differ): the count
        check, the length check, then each (old, new) pair in order. Returns the summed price
        difference and the last variant examined."""
        self._count_check(order, item_ids, count_error)
        if len(item_ids) != len(new_item_ids):
            raise ValueError(length_error)
        diff = 0
        variant = None
        for item_id, new_item_id in zip(item_ids, new_item_ids, strict=False):  # upstream's zip (lengths checked before)
            if distinct and item_id == new_item_id:
                raise ValueError("The new item id should be different from the old item id")
            item = next((item for item in order["items"] if item["item_id"] == item_id), None)
            if item is None:
                raise ValueError(f"Item {item_id} not found")
            variant = self._variant(item["product_id"], new_item_id)
            if not variant["available"]:
                raise ValueError(f"New item {new_item_id} not found or available")
            diff += variant["price"] - item["price"]
        return diff, variant

    @tool
    def cancel_pending_order(self, order_id: Any, reason: Any) -> Record:
        order = self._order_in_status(order_id, "pending", "Non-pending order cannot be cancelled")
        if reason not in CANCEL_REASONS:
            raise ValueError("Invalid reason")
        order = self.orders.for_update(order_id)
        refunds = []
        for payment in order["payment_history"]:
            refunds.append(
                OrderPayment.build(
                    transaction_type="refund", amount=payment["amount"], payment_method_id=payment["payment_method_id"]
                )
            )
            method = self._payment_method(order["user_id"], payment["payment_method_id"])
            if method["source"] == "gift_card":
                self._add_to_gift_card(order["user_id"], payment["payment_method_id"], payment["amount"])
        order["status"] = "cancelled"
        order["cancel_reason"] = reason
        order["payment_history"].extend(refunds)
        return order

    @tool
    def exchange_delivered_order_items(
        self, order_id: Any, item_ids: Any, new_item_ids: Any, payment_method_id: Any
    ) -> Record:
        order = self._order_in_status(order_id, "delivered", "Non-delivered order cannot be exchanged")
        diff, _ = self._price_pairs(
            order,
            item_ids,
            new_item_ids,
            count_error="Number of {item_id} not found.",
            length_error="The number of items to be exchanged should match.",
            distinct=False,
        )
        diff = round(diff, 2)
        method = self._payment_method(order["user_id"], payment_method_id)
        if method["source"] == "gift_card" and method["balance"] < diff:
            raise ValueError("Insufficient gift card balance to pay for the price difference")
        order = self.orders.for_update(order_id)
        order["status"] = "exchange requested"
        order["exchange_items"] = sorted(item_ids)
        order["exchange_new_items"] = sorted(new_item_ids)
        order["exchange_payment_method_id"] = payment_method_id
        order["exchange_price_difference"] = diff
        return order

    @tool
    def find_user_id_by_name_zip(self, first_name: Any, last_name: Any, zip: Any) -> str:
        for user_id, user in self.users.items():
            if (
                user["name"]["first_name"].lower() == first_name.lower()
                and user["name"]["last_name"].lower() == last_name.lower()
                and user["address"]["zip"] == zip
            ):
                return user_id
        raise ValueError("User not found")

    @tool
    def find_user_id_by_email(self, email: Any) -> str:
        for user_id, user in self.users.items():
            if user["email"].lower() == email.lower():
                return user_id
        raise ValueError("User not found")

    @tool
    def get_order_details(self, order_id: Any) -> Record:
        return self._order(order_id)

    @tool
    def get_product_details(self, product_id: Any) -> Record:
        return self._product(product_id)

    @tool
    def get_item_details(self, item_id: Any) -> Record:
        for product in self.products.values():
            if item_id in product["variants"]:
                return product["variants"][item_id]
        raise ValueError("Item not found")

    @tool
    def get_user_details(self, user_id: Any) -> Record:
        return self._user(user_id)

    @tool
    def list_all_product_types(self) -> str:
        names = {product["name"]: product["product_id"] for product in self.products.values()}
        return json.dumps(names, sort_keys=True)

    @tool
    def modify_pending_order_address(
        self, order_id: Any, address1: Any, address2: Any, city: Any, state: Any, country: Any, zip: Any
    ) -> Record:
        if "pending" not in self._order(order_id)["status"]:
            raise ValueError("Non-pending order cannot be modified")
        address = Address.build(
            address1=address1, address2=address2, city=city, state=state, country=country, zip=zip
        )
        order = self.orders.for_update(order_id)
        order["address"] = address
        return order

    @tool
    def modify_pending_order_items(
        self, order_id: Any, item_ids: Any, new_item_ids: Any, payment_method_id: Any
    ) -> Record:
        order = self._order_in_status(order_id, "pending", "Non-pending order cannot be modified")
        diff, variant = self._price_pairs(
            order,
            item_ids,
            new_item_ids,
            count_error="{item_id} not found",
            length_error="The number of items to be exchanged should match",
            distinct=True,
        )
        method = self._payment_method(order["user_id"], payment_method_id)
        if method["source"] == "gift_card" and method["balance"] < diff:
            raise ValueError("Insufficient gift card balance to pay for the new item")
        order = self.orders.for_update(order_id)
        order["payment_history"].append(
            OrderPayment.build(
                transaction_type="payment" if diff > 0 else "refund",
                amount=abs(diff),
                payment_method_id=payment_method_id,
            )
        )
        if method["source"] == "gift_card":
            self._add_to_gift_card(order["user_id"], payment_method_id, -diff)
        for item_id, new_item_id in zip(item_ids, new_item_ids, strict=False):  # upstream's zip (lengths checked before)
            item = next(item for item in order["items"] if item["item_id"] == item_id)
            item["item_id"] = new_item_id
            # Upstream quirk: every modified item takes the price and options of the last pair.
            assert variant is not None  # there is a pair, so _price_pairs examined a variant
            item["price"] = variant["price"]
            item["options"] = dict(variant["options"])
        order["status"] = "pending (item modified)"
        return order

    @tool
    def modify_pending_order_payment(self, order_id: Any, payment_method_id: Any) -> Record:
        order = self._order(order_id)
        if "pending" not in order["status"]:
            raise ValueError("Non-pending order cannot be modified")
        method = self._payment_method(order["user_id"], payment_method_id)
        history = order["payment_history"]
        if len(history) != 1 or history[0]["transaction_type"] != "payment":
            raise ValueError("There should be exactly one payment for a pending order")
        old_method_id = history[0]["payment_method_id"]
        if old_method_id == payment_method_id:
            raise ValueError("The new payment method should be different from the current one")
        amount = history[0]["amount"]
        if method["source"] == "gift_card" and method["balance"] < amount:
            raise ValueError("Insufficient gift card balance to pay for the order")
        order = self.orders.for_update(order_id)
        order["payment_history"].extend([
            OrderPayment.build(transaction_type="payment", amount=amount, payment_method_id=payment_method_id),
            OrderPayment.build(transaction_type="refund", amount=amount, payment_method_id=old_method_id),
        ])
        if method["source"] == "gift_card":
            self._add_to_gift_card(order["user_id"], payment_method_id, -amount)
        if self._payment_method(order["user_id"], old_method_id)["source"] == "gift_card":
            self._add_to_gift_card(order["user_id"], old_method_id, amount)
        return order

    @tool
    def modify_user_address(
        self, user_id: Any, address1: Any, address2: Any, city: Any, state: Any, country: Any, zip: Any
    ) -> Record:
        self._user(user_id)
        address = Address.build(
            address1=address1, address2=address2, city=city, state=state, country=country, zip=zip
        )
        user = self.users.for_update(user_id)
        user["address"] = address
        return user

    @tool
    def return_delivered_order_items(self, order_id: Any, item_ids: Any, payment_method_id: Any) -> Record:
        order = self._order_in_status(order_id, "delivered", "Non-delivered order cannot be returned")
        method = self._payment_method(order["user_id"], payment_method_id)
        if method["source"] != "gift_card" and payment_method_id != order["payment_history"][0]["payment_method_id"]:
            raise ValueError("Payment method should be the original payment method")
        self._count_check(order, item_ids, "Some item not found")
        order = self.orders.for_update(order_id)
        order["status"] = "return requested"
        order["return_items"] = sorted(item_ids)
        order["return_payment_method_id"] = payment_method_id
        return order
