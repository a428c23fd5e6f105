"""Retail database records (TOOLS.md §1.2); field order is the order of tool outputs."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from pipeline.benchmarks.taubench.records import CreditCard, Name, UpstreamRecord


class Variant(UpstreamRecord):
    item_id: str
    options: dict[str, str]
    available: bool
    price: float


class Product(UpstreamRecord):
    name: str
    product_id: str
    variants: dict[str, Variant]


class Address(UpstreamRecord):
    address1: str
    address2: str
    city: str
    country: str
    state: str
    zip: str


class Paypal(UpstreamRecord):
    source: Literal["paypal"]
    id: str


class GiftCard(UpstreamRecord):
    source: Literal["gift_card"]
    id: str
    balance: float


PaymentMethod = Annotated[CreditCard | Paypal | GiftCard, Field(discriminator="source")]


class User(UpstreamRecord):
    user_id: str
    name: Name
    address: Address
    email: str
    payment_methods: dict[str, PaymentMethod]
    orders: list[str]


class OrderItem(UpstreamRecord):
    name: str
    product_id: str
    item_id: str
    price: float
    options: dict[str, str]


class Fulfillment(UpstreamRecord):
    tracking_id: list[str]
    item_ids: list[str]


class OrderPayment(UpstreamRecord):
    transaction_type: Literal["payment", "refund"]
    amount: float
    payment_method_id: str


class Order(UpstreamRecord):
    order_id: str
    user_id: str
    address: Address
    items: list[OrderItem]
    status: str
    fulfillments: list[Fulfillment]
    payment_history: list[OrderPayment]
    cancel_reason: str | None = None
    exchange_items: list[str] | None = None
    exchange_new_items: list[str] | None = None
    exchange_payment_method_id: str | None = None
    exchange_price_difference: float | None = None
    return_items: list[str] | None = None
    return_payment_method_id: str | None = None


COLLECTIONS: dict[str, type[UpstreamRecord]] = {
    "products": Product,
    "users": User,
    "orders": Order,
}
