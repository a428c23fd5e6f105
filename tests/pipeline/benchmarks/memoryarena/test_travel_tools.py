"""The six travel tools over travel_db/ with upstream's exact texts (CONTRACT §4.3; checklist 14, 15)."""

from __future__ import annotations

import pytest

from pipeline.benchmarks.memoryarena.travel_tools import TravelTools, checksums, travel_db_at
from tests.pipeline.benchmarks.memoryarena.conftest import TRAVEL_DB


@pytest.fixture(scope="module")
def tools() -> TravelTools:
    return TravelTools(travel_db_at(TRAVEL_DB))


def test_flight_search_text_is_pandas_to_string(tools: TravelTools) -> None:
    assert tools.execute("FlightSearch", {"origin": "St. Petersburg", "destination": "Rockford", "date": "2022-03-16"}) == (
        "Flight Number  Price DepTime ArrTime  ActualElapsedTime FlightDate OriginCityName DestCityName  Distance\n"
        "     F3573659    474   15:40   17:04 2 hours 24 minutes 2022-03-16 St. Petersburg     Rockford    1049.0")


@pytest.mark.parametrize(("tool", "args", "expected"), [
    ("FlightSearch", {"origin": "St. Petersburg", "destination": "Rockford", "date": "2022-03-17"},
     "There is no flight from St. Petersburg to Rockford on 2022-03-17."),
    ("FlightSearch", {"origin": "Rockford", "destination": 5, "date": None}, "There is no flight from Rockford to 5 on None."),
    ("RestaurantSearch", {"city": "Atlantis"}, "There is no restaurant in this city."),
    ("AccommodationSearch", {"city": "Atlantis"}, "There is no attraction in this city."),  # upstream's wording
    ("AttractionSearch", {"city": "Atlantis"}, "There is no attraction in this city."),
    ("RestaurantSearch", {"city": "rockford"}, "There is no restaurant in this city."),  # case-sensitive
    ("AttractionSearch", {"city": "Houston(Texas)"}, "There is no attraction in this city."),  # no (State) stripping
    ("CitySearch", {"state": "texas"}, "Invalid State"),
    ("FlightSearch", {"origin": "A", "destination": "B"}, "Error executing FlightSearch: 'date'"),
    ("RestaurantSearch", {}, "Error executing RestaurantSearch: 'city'"),
    ("CitySearch", [], "Error executing CitySearch: list indices must be integers or slices, not str"),
    ("DistanceMatrix", {"origin": 3, "destination": "B"}, "Error executing DistanceMatrix: expected string or bytes-like "
                                                           "object, got 'int'"),
    ("HotelSearch", {"city": "Rockford"}, "Error: Unknown tool 'HotelSearch'"),
])
def test_empty_results_and_errors(tools: TravelTools, tool: str, args: object, expected: str) -> None:
    assert tools.execute(tool, args) == expected


def test_tables_drop_rows_with_empty_fields_but_the_distance_table(tools: TravelTools) -> None:
    db = tools.db
    assert (len(db.restaurants), len(db.accommodations), len(db.attractions), len(db.distance)) == (9551, 4285, 5302, 17602)
    assert len(db.flights) == 313  # the reduced table
    rockford = tools.execute("AccommodationSearch", {"city": "Rockford"}).splitlines()
    assert rockford[0].split() == ["NAME", "price", "room", "type", "house_rules", "minimum", "nights", "maximum",
                                   "occupancy", "review", "rate", "number", "city"]


def test_distance_matrix(tools: TravelTools) -> None:
    assert tools.execute("DistanceMatrix", {"origin": "Las Vegas", "destination": "Stockton"}) == (
        "origin: Las Vegas\ndestination: Stockton\ncost: 41\nduration: 7 hours 46 mins\ndistance: 835 km")
    # cut before the first "(...)", not stripped; any mode but "taxi" is driving; taxi costs int(km)
    assert tools.execute("DistanceMatrix", {"origin": "San Antonio(Texas)", "destination": "Houston", "mode": "taxi"}) == (
        "origin: San Antonio\ndestination: Houston\ncost: 317\nduration: 2 hours 56 mins\ndistance: 317 km")
    assert tools.execute("DistanceMatrix", {"origin": "San Antonio", "destination": "Houston", "mode": "self-driving"}
                         ).splitlines()[2] == "cost: 15"
    assert tools.execute("DistanceMatrix", {"origin": "San Antonio (Texas)", "destination": "Houston"}).splitlines()[:3] == [
        "origin: San Antonio ", "destination: Houston", "cost: None"]
    assert tools.execute("DistanceMatrix", {"origin": "Atlantis", "destination": "Houston"}) == (
        "origin: Atlantis\ndestination: Houston\ncost: None\nduration: None\ndistance: None")


def test_a_trip_of_days_has_no_cost(tools: TravelTools) -> None:
    days = tools.db.distance[tools.db.distance["duration"].str.contains("day", na=False)].iloc[0]
    text = tools.execute("DistanceMatrix", {"origin": days["origin"], "destination": days["destination"]})
    assert "cost: None" in text and "day" in text.splitlines()[3]


def test_city_search_lists_the_states_cities_in_file_order(tools: TravelTools) -> None:
    cities = tools.execute("CitySearch", {"state": "Texas"}).split(", ")
    assert cities[:3] == ["Abilene", "Amarillo", "Harlingen"] and "Houston" in cities


def test_the_database_is_the_pinned_one(flowstate_data) -> None:  # noqa: ANN001
    sums = checksums()
    assert sums["memoryarena/travel_db/flights/clean_Flights_2022.csv"].startswith("b06b0e0f")
    assert len(sums) == 6
