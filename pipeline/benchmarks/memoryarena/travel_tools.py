"""The six TravelPlanner tools over ``travel_db/``, in-process, with upstream's exact result texts
(CONTRACT §4.3). Tables are read once per process with pandas' defaults; rows with an empty field
are dropped from every table but the distance matrix. Arguments are used as the model wrote them:
nothing is validated, and whatever goes wrong is the text ``Error executing <tool>: <message>``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.benchmarks.memoryarena.data import MemoryArenaDataError, data_root
from pipeline.core.data import sha256_file

if TYPE_CHECKING:  # pandas is imported where the tables are read: every process loads this module
    import pandas as pd

TABLES: dict[str, str] = {
    "flights": "flights/clean_Flights_2022.csv",
    "restaurants": "restaurants/clean_restaurant_2022.csv",
    "accommodations": "accommodations/clean_accommodations_2022.csv",
    "attractions": "attractions/attractions.csv",
    "distance": "googleDistanceMatrix/distance.csv",
    "cities": "background/citySet_with_states.txt",
}
# SHA-256 of the tables in the data directory (travel_db/SOURCE.md); the flights table is the reduced one.
SHA256: dict[str, str] = {
    "flights/clean_Flights_2022.csv": "b06b0e0fe423222f1f9c688aa50a93b33842be4a8474585be9698b259cf27795",
    "restaurants/clean_restaurant_2022.csv": "a38ef00a3398b1ef78306a9b1851c491723d27899c6a1d4a3d6fe042929c0f26",
    "accommodations/clean_accommodations_2022.csv": "7e70cc8cb573e824267be47153a3cf7934c839f01c955fb523d18be405921d86",
    "attractions/attractions.csv": "8007fa851ba5b3adb205fbd298169c95116b297cef7ccd21dbea26ecce2605d8",
    "googleDistanceMatrix/distance.csv": "44726ca74a335fd2d4824fc748f8832813550bfead37376fd51d6521a93a8b3b",
    "background/citySet_with_states.txt": "a3d18b5c692857cd561cbb4ad8d221ac3eb6c47af7c787a3489e3ffa184ca4d6",
}
# A user's own full flights table (TravelPlanner's Google Drive file), used instead of the reduced one.
FULL_FLIGHTS = "full_flights/clean_Flights_2022.csv"

FLIGHT_COLUMNS = ["Flight Number", "Price", "DepTime", "ArrTime", "ActualElapsedTime", "FlightDate", "OriginCityName",
                  "DestCityName", "Distance"]
RESTAURANT_COLUMNS = ["Name", "Average Cost", "Cuisines", "Aggregate Rating", "City"]
ACCOMMODATION_COLUMNS = ["NAME", "price", "room type", "house_rules", "minimum nights", "maximum occupancy",
                         "review rate number", "city"]
ATTRACTION_COLUMNS = ["Name", "Latitude", "Longitude", "Address", "Phone", "Website", "City"]
_IN_PARENS = re.compile(r"^(.*?)\([^)]*\)")


def db_dir(data_dir: str | Path | None = None) -> Path:
    return data_root(data_dir) / "travel_db"


def flights_file(data_dir: str | Path | None = None) -> Path:
    """The full flights table where the user put one, else the reduced table."""
    full = data_root(data_dir) / FULL_FLIGHTS
    return full if full.is_file() else db_dir(data_dir) / TABLES["flights"]


def checksums(data_dir: str | Path | None = None) -> dict[str, str]:
    """``memoryarena/travel_db/<file> -> sha256`` of the tables episodes read, after verifying the pinned ones."""
    root = db_dir(data_dir)
    out = {}
    for relative, expected in SHA256.items():
        path = flights_file(data_dir) if relative == TABLES["flights"] else root / relative
        if not path.is_file():
            raise MemoryArenaDataError(f"travel table {path} is missing: set FLOWSTATE_DATA to the folder holding "
                                       "memoryarena/travel_db/")
        actual = sha256_file(path)
        if actual != expected and path.parent.name != "full_flights":
            raise MemoryArenaDataError(f"travel table {path} has SHA-256 {actual}, expected {expected} "
                                       "(travel_db/SOURCE.md): a different or corrupt file")
        out[f"memoryarena/travel_db/{relative}"] = actual
    return out


class TravelDB:
    """The tables, as pandas reads them (loaded once per process per directory)."""

    def __init__(self, root: Path, flights: Path) -> None:
        import pandas as pd

        self.flights = pd.read_csv(flights).dropna()
        self.restaurants = pd.read_csv(root / TABLES["restaurants"]).dropna()
        self.accommodations = pd.read_csv(root / TABLES["accommodations"]).dropna()
        self.attractions = pd.read_csv(root / TABLES["attractions"]).dropna()
        self.distance = pd.read_csv(root / TABLES["distance"])
        lines = (root / TABLES["cities"]).read_text(encoding="utf-8").strip().split("\n")
        self.cities = [tuple(line.split("\t")) for line in lines]


@cache
def _db(root: str, flights: str) -> TravelDB:
    return TravelDB(Path(root), Path(flights))


def travel_db(data_dir: str | Path | None = None) -> TravelDB:
    """The database of the data directory (with the user's full flights table if there is one)."""
    return _db(str(db_dir(data_dir)), str(flights_file(data_dir)))


def travel_db_at(folder: Path) -> TravelDB:
    """A database folder in upstream's layout (``travel_db/``), as the travel-tool command names it."""
    if not (folder / TABLES["restaurants"]).is_file():
        raise MemoryArenaDataError(f"{folder}: not a travel database folder (no {TABLES['restaurants']})")
    return _db(str(folder.resolve()), str((folder / TABLES["flights"]).resolve()))


class TravelTools:
    """``execute(name, arguments) -> result text`` over one database."""

    def __init__(self, db: TravelDB) -> None:
        self.db = db
        self._tools: dict[str, Callable[[Any], str]] = {
            "FlightSearch": self._flights, "RestaurantSearch": self._restaurants,
            "AccommodationSearch": self._accommodations, "AttractionSearch": self._attractions,
            "DistanceMatrix": self._distance, "CitySearch": self._cities,
        }

    def execute(self, name: str, arguments: Any) -> str:
        tool = self._tools.get(name)
        if tool is None:
            return f"Error: Unknown tool '{name}'"
        try:
            return tool(arguments)
        except Exception as exc:  # noqa: BLE001 - upstream reports every failure as text to the agent
            return f"Error executing {name}: {exc}"

    def _flights(self, args: Any) -> str:
        origin, destination, date = args["origin"], args["destination"], args["date"]
        df = self.db.flights
        rows = df[(df["OriginCityName"] == origin) & (df["DestCityName"] == destination) & (df["FlightDate"] == date)]
        return _text(rows, FLIGHT_COLUMNS, f"There is no flight from {origin} to {destination} on {date}.")

    def _restaurants(self, args: Any) -> str:
        df = self.db.restaurants
        return _text(df[df["City"] == args["city"]], RESTAURANT_COLUMNS, "There is no restaurant in this city.")

    def _accommodations(self, args: Any) -> str:
        df = self.db.accommodations
        return _text(df[df["city"] == args["city"]], ACCOMMODATION_COLUMNS, "There is no attraction in this city.")

    def _attractions(self, args: Any) -> str:
        df = self.db.attractions
        return _text(df[df["City"] == args["city"]], ATTRACTION_COLUMNS, "There is no attraction in this city.")

    def _distance(self, args: Any) -> str:
        origin, destination = _city(args["origin"]), _city(args["destination"])
        mode = "taxi" if args.get("mode") == "taxi" else "driving"
        df = self.db.distance
        rows = df[(df["origin"] == origin) & (df["destination"] == destination)]
        cost = duration = distance = None
        if len(rows) and rows.iloc[0][["duration", "distance"]].notna().all():
            duration, distance = rows.iloc[0]["duration"], rows.iloc[0]["distance"]
            if "day" not in duration:
                km = float(distance.replace("km", "").replace(",", ""))
                cost = int(km) if mode == "taxi" else int(km * 0.05)
        return f"origin: {origin}\ndestination: {destination}\ncost: {cost}\nduration: {duration}\ndistance: {distance}"

    def _cities(self, args: Any) -> str:
        state = args["state"]
        found = [city for city, in_state in self.db.cities if in_state == state]
        return ", ".join(found) if found else "Invalid State"


def _city(value: Any) -> Any:
    """A DistanceMatrix place cut before its first parenthesised part (``San Antonio(Texas)``)."""
    match = _IN_PARENS.search(value)
    return match.group(1) if match else value


def _text(rows: pd.DataFrame, columns: list[str], empty: str) -> str:
    return empty if rows.empty else rows[columns].to_string(index=False)


def run_calls(calls: list[Mapping[str, Any]], db: TravelDB) -> list[str]:
    """The travel-tool command: each call's result text, in order."""
    tools = TravelTools(db)
    return [tools.execute(str(c.get("name")), c.get("arguments", {})) for c in calls]
