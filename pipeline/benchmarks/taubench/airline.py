"""The 14 airline tools (TOOLS.md §4), step for step in upstream's order.

Each tool performs its checks and writes in the documented order with plain Python operations
on the raw arguments, so that wrong argument types fail with the same Python messages at the
same point, and partial writes before a failure stay (there is no rollback). A record is copied
into the episode (``for_update``) just before it is first written.
"""

from __future__ import annotations

from typing import Any

from pipeline.benchmarks.taubench.airline_models import (
    Certificate,
    FlightInfo,
    Passenger,
    Payment,
    Reservation,
    ReservationFlight,
)
from pipeline.benchmarks.taubench.database import Record, Table
from pipeline.benchmarks.taubench.records import UpstreamRecord
from pipeline.benchmarks.taubench.toolkit import ToolKit, table, tool

NOW = "2024-05-15T15:00:00"
NEW_RESERVATION_IDS = ("HATHAT", "HATHAU", "HATHAV")
NEW_CERTIFICATE_IDS = ("certificate_3221322", "certificate_3221323", "certificate_3221324")
AIRPORTS = (
    ("SFO", "San Francisco"), ("JFK", "New York"), ("LAX", "Los Angeles"), ("ORD", "Chicago"),
    ("DFW", "Dallas"), ("DEN", "Denver"), ("SEA", "Seattle"), ("ATL", "Atlanta"), ("MIA", "Miami"),
    ("BOS", "Boston"), ("PHX", "Phoenix"), ("IAH", "Houston"), ("LAS", "Las Vegas"),
    ("MCO", "Orlando"), ("EWR", "Newark"), ("CLT", "Charlotte"), ("MSP", "Minneapolis"),
    ("DTW", "Detroit"), ("PHL", "Philadelphia"), ("LGA", "LaGuardia"),
)


def records_or_raw(value: Any, model: type[UpstreamRecord]) -> Any:
    """Upstream's list conversion: iterate the argument (so ``null`` fails here); if every
    element is an object, validate each into ``model``; otherwise keep the raw value."""
    if all(isinstance(item, dict) for item in value):
        return [model.model_validate(item) for item in value]
    return value


def stored(value: Any) -> Any:
    """What ends up in the DB: validated records as dicts, a raw argument as given."""
    if isinstance(value, list) and value and isinstance(value[0], UpstreamRecord):
        return [item.model_dump() for item in value]
    return value


class AirlineTools(ToolKit):
    flights: Table = table("flights")
    users: Table = table("users")
    reservations: Table = table("reservations")

    def _user(self, user_id: Any) -> Record:
        return self._lookup("users", user_id, f"User {user_id} not found")

    def _reservation(self, reservation_id: Any) -> Record:
        return self._lookup("reservations", reservation_id, f"Reservation {reservation_id} not found")

    def _flight(self, flight_number: Any) -> Record:
        return self._lookup("flights", flight_number, f"Flight {flight_number} not found")

    def _flight_date(self, flight_number: Any, date: Any) -> Record:
        dates = self._flight(flight_number)["dates"]
        if date not in dates:
            raise ValueError(f"Flight {flight_number} not found on date {date}")
        return dates[date]

    def _available_flights(
        self, date: Any, origin: Any, destination: Any, leave_after: str | None = None
    ) -> list[Record]:
        """Direct-search hits in file order; ``None`` origin/destination match every flight."""
        hits = []
        for flight in self.flights.values():
            if (
                (origin is None or flight["origin"] == origin)
                and (destination is None or flight["destination"] == destination)
                and date in flight["dates"]
                and flight["dates"][date]["status"] == "available"
                and (leave_after is None or flight["scheduled_departure_time_est"] >= leave_after)
            ):
                entry = flight["dates"][date]
                hits.append({
                    "flight_number": flight["flight_number"],
                    "origin": flight["origin"],
                    "destination": flight["destination"],
                    "status": "available",
                    "scheduled_departure_time_est": flight["scheduled_departure_time_est"],
                    "scheduled_arrival_time_est": flight["scheduled_arrival_time_est"],
                    "date": None,
                    "available_seats": dict(entry["available_seats"]),
                    "prices": dict(entry["prices"]),
                })
        return hits

    def _new_segment(self, flight_info: Any, cabin: Any, passenger_count: int) -> Record:
        """A segment at the flight's current price, after the availability and seat checks."""
        flight = self._flight(flight_info.flight_number)
        entry = self._flight_date(flight_info.flight_number, flight_info.date)
        if entry["status"] != "available":
            raise ValueError(f"Flight {flight_info.flight_number} not available on date {flight_info.date}")
        if entry["available_seats"][cabin] < passenger_count:
            raise ValueError(f"Not enough seats on flight {flight_info.flight_number}")
        return ReservationFlight.build(
            flight_number=flight_info.flight_number,
            origin=flight["origin"],
            destination=flight["destination"],
            date=flight_info.date,
            price=entry["prices"][cabin],
        )

    def _pay_and_update(self, reservation_id: str, payment_id: Any, amount: Any, **fields: Any) -> Record:
        """The payment rule of §4.11 for flight and baggage updates, then the raw field writes."""
        reservation = self.reservations.for_update(reservation_id)
        methods = self.users[reservation["user_id"]]["payment_methods"]
        if payment_id not in methods:
            raise ValueError("Payment method not found")
        method = methods[payment_id]
        if method["source"] == "certificate":
            raise ValueError("Certificate cannot be used to update reservation")
        if method["source"] == "gift_card" and method["amount"] < amount:
            raise ValueError("Gift card balance is not enough")
        if method["source"] == "gift_card":
            self.users.for_update(reservation["user_id"])["payment_methods"][payment_id]["amount"] -= amount
        if amount != 0:
            reservation["payment_history"].append(Payment.build(payment_id=payment_id, amount=amount))
        reservation.update(fields)
        return reservation

    @tool
    def book_reservation(
        self,
        user_id: Any,
        origin: Any,
        destination: Any,
        flight_type: Any,
        cabin: Any,
        flights: Any,
        passengers: Any,
        payment_methods: Any,
        total_baggages: Any,
        nonfree_baggages: Any,
        insurance: Any,
    ) -> Record:
        flights = records_or_raw(flights, FlightInfo)
        passengers = records_or_raw(passengers, Passenger)
        payment_methods = records_or_raw(payment_methods, Payment)
        user = self._user(user_id)
        reservation_id = next((rid for rid in NEW_RESERVATION_IDS if rid not in self.reservations), None)
        if reservation_id is None:
            raise ValueError("Too many reservations")
        reservation = Reservation.build(
            reservation_id=reservation_id,
            user_id=user_id,
            origin=origin,
            destination=destination,
            flight_type=flight_type,
            cabin=cabin,
            flights=[],
            passengers=passengers,
            payment_history=payment_methods,
            created_at=NOW,
            total_baggages=total_baggages,
            nonfree_baggages=nonfree_baggages,
            insurance=insurance,
            status=None,
        )
        total_price = 0
        for flight_info in flights:
            segment = self._new_segment(flight_info, cabin, len(passengers))
            reservation["flights"].append(segment)
            total_price += segment["price"] * len(passengers)
        if insurance == "yes":
            total_price += 30 * len(passengers)
        total_price += 50 * nonfree_baggages  # the raw argument, not the coerced record value
        for payment in payment_methods:
            if payment.payment_id not in user["payment_methods"]:
                raise ValueError(f"Payment method {payment.payment_id} not found")
            method = user["payment_methods"][payment.payment_id]
            if method["source"] in ("gift_card", "certificate") and method["amount"] < payment.amount:
                raise ValueError(f"Not enough balance in payment method {payment.payment_id}")
        total_payment = sum(payment.amount for payment in payment_methods)
        if total_payment != total_price:
            raise ValueError(
                f"Payment amount does not add up, total price is {total_price}, but paid {total_payment}"
            )
        user = self.users.for_update(user_id)
        for payment in payment_methods:
            method = user["payment_methods"][payment.payment_id]  # KeyError for a certificate used twice
            if method["source"] == "gift_card":
                method["amount"] -= payment.amount
            elif method["source"] == "certificate":
                del user["payment_methods"][payment.payment_id]
        for flight_info in flights:
            dates = self.flights.for_update(flight_info.flight_number)["dates"]
            dates[flight_info.date]["available_seats"][cabin] -= len(passengers)
        self.reservations.add(reservation_id, reservation)
        user["reservations"].append(reservation_id)
        return reservation

    @tool
    def cancel_reservation(self, reservation_id: Any) -> Record:
        self._reservation(reservation_id)
        reservation = self.reservations.for_update(reservation_id)
        refunds = [
            Payment.build(payment_id=payment["payment_id"], amount=-payment["amount"])
            for payment in reservation["payment_history"]
        ]
        reservation["payment_history"].extend(refunds)
        reservation["status"] = "cancelled"
        return reservation

    @tool
    def get_reservation_details(self, reservation_id: Any) -> Record:
        return self._reservation(reservation_id)

    @tool
    def get_user_details(self, user_id: Any) -> Record:
        return self._user(user_id)

    @tool
    def list_all_airports(self) -> list[dict[str, str]]:
        return [{"iata": iata, "city": city} for iata, city in AIRPORTS]

    @tool
    def search_direct_flight(self, origin: Any, destination: Any, date: Any) -> list[Record]:
        return self._available_flights(date, origin, destination)

    @tool
    def search_onestop_flight(self, origin: Any, destination: Any, date: Any) -> list[list[Record]]:
        pairs = []
        for first in self._available_flights(date, origin, None):
            first["date"] = date
            overnight = "+1" in first["scheduled_arrival_time_est"]
            connection_date = f"2024-05-{int(date[-2:]) + 1}" if overnight else date
            for second in self._available_flights(
                connection_date, first["destination"], destination, first["scheduled_arrival_time_est"]
            ):
                second["date"] = connection_date
                pairs.append([first, second])
        return pairs

    @tool
    def send_certificate(self, user_id: Any, amount: Any) -> str:
        methods = self._user(user_id)["payment_methods"]
        for certificate_id in NEW_CERTIFICATE_IDS:
            if certificate_id not in methods:
                certificate = Certificate.build(id=certificate_id, amount=amount, source="certificate")
                self.users.for_update(user_id)["payment_methods"][certificate_id] = certificate
                return f"Certificate {certificate_id} added to user {user_id} with amount {amount}."
        raise ValueError("Too many certificates")

    @tool
    def update_reservation_baggages(
        self, reservation_id: Any, total_baggages: Any, nonfree_baggages: Any, payment_id: Any
    ) -> Record:
        reservation = self._reservation(reservation_id)
        self._user(reservation["user_id"])
        total_price = 50 * max(0, nonfree_baggages - reservation["nonfree_baggages"])
        return self._pay_and_update(
            reservation_id, payment_id, total_price, total_baggages=total_baggages, nonfree_baggages=nonfree_baggages
        )

    @tool
    def update_reservation_flights(
        self, reservation_id: Any, cabin: Any, flights: Any, payment_id: Any
    ) -> Record:
        flights = records_or_raw(flights, FlightInfo)
        reservation = self._reservation(reservation_id)
        self._user(reservation["user_id"])
        passenger_count = len(reservation["passengers"])
        total_price = 0
        new_flights = []
        for flight_info in flights:
            kept = next(
                (
                    segment
                    for segment in reservation["flights"]
                    if segment["flight_number"] == flight_info.flight_number
                    and segment["date"] == flight_info.date
                    and cabin == reservation["cabin"]
                ),
                None,
            )
            if kept is not None:  # same flight, date and cabin: the booked price stays
                total_price += kept["price"] * passenger_count
                new_flights.append(dict(kept))
                continue
            segment = self._new_segment(flight_info, cabin, passenger_count)
            total_price += segment["price"] * passenger_count
            new_flights.append(segment)
        total_price -= sum(segment["price"] for segment in reservation["flights"]) * passenger_count
        return self._pay_and_update(reservation_id, payment_id, total_price, flights=new_flights, cabin=cabin)

    @tool
    def update_reservation_passengers(self, reservation_id: Any, passengers: Any) -> Record:
        passengers = records_or_raw(passengers, Passenger)
        current = self._reservation(reservation_id)
        if len(passengers) != len(current["passengers"]):
            raise ValueError("Number of passengers does not match")
        reservation = self.reservations.for_update(reservation_id)
        reservation["passengers"] = stored(passengers)
        return reservation

    @tool
    def get_flight_status(self, flight_number: Any, date: Any) -> str:
        return self._flight_date(flight_number, date)["status"]
