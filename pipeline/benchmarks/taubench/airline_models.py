"""Airline database records (TOOLS.md §1.2); field order is the order of tool outputs."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from pipeline.benchmarks.taubench.records import CreditCard, Name, UpstreamRecord

Cabin = Literal["business", "economy", "basic_economy"]


class FlightDateAvailable(UpstreamRecord):
    status: Literal["available"]
    available_seats: dict[str, int]
    prices: dict[str, int]


class FlightDateLanded(UpstreamRecord):
    status: Literal["landed"]
    actual_departure_time_est: str
    actual_arrival_time_est: str


class FlightDateCancelled(UpstreamRecord):
    status: Literal["cancelled"]


class FlightDateDelayed(UpstreamRecord):
    status: Literal["delayed"]
    estimated_departure_time_est: str
    estimated_arrival_time_est: str


class FlightDateFlying(UpstreamRecord):
    status: Literal["flying"]
    actual_departure_time_est: str
    estimated_arrival_time_est: str


class FlightDateOnTime(UpstreamRecord):
    status: Literal["on time"]
    estimated_departure_time_est: str
    estimated_arrival_time_est: str


FlightDate = Annotated[
    FlightDateAvailable | FlightDateLanded | FlightDateCancelled | FlightDateDelayed | FlightDateFlying | FlightDateOnTime,
    Field(discriminator="status"),
]


class Flight(UpstreamRecord):
    flight_number: str
    origin: str
    destination: str
    scheduled_departure_time_est: str
    scheduled_arrival_time_est: str
    dates: dict[str, FlightDate]


class Address(UpstreamRecord):
    address1: str
    address2: str | None = None
    city: str
    country: str
    state: str
    zip: str


class Passenger(UpstreamRecord):
    first_name: str
    last_name: str
    dob: str


class GiftCard(UpstreamRecord):
    source: Literal["gift_card"]
    id: str
    amount: float


class Certificate(UpstreamRecord):
    source: Literal["certificate"]
    id: str
    amount: float


PaymentMethod = Annotated[CreditCard | GiftCard | Certificate, Field(discriminator="source")]


class User(UpstreamRecord):
    user_id: str
    name: Name
    address: Address
    email: str
    dob: str
    payment_methods: dict[str, PaymentMethod]
    saved_passengers: list[Passenger]
    membership: Literal["gold", "silver", "regular"]
    reservations: list[str]


class ReservationFlight(UpstreamRecord):
    flight_number: str
    origin: str
    destination: str
    date: str
    price: int


class Payment(UpstreamRecord):
    payment_id: str
    amount: int


class FlightInfo(UpstreamRecord):
    """A flight requested by the agent (argument record, never stored as such)."""

    flight_number: str
    date: str


class Reservation(UpstreamRecord):
    reservation_id: str
    user_id: str
    origin: str
    destination: str
    flight_type: Literal["round_trip", "one_way"]
    cabin: Cabin
    flights: list[ReservationFlight]
    passengers: list[Passenger]
    payment_history: list[Payment]
    created_at: str
    total_baggages: int
    nonfree_baggages: int
    insurance: Literal["yes", "no"]
    status: Literal["cancelled"] | None = None


COLLECTIONS: dict[str, type[UpstreamRecord]] = {
    "flights": Flight,
    "users": User,
    "reservations": Reservation,
}
