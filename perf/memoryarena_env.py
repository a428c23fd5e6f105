"""What MemoryArena costs the pipeline beside the model: episode setup, a travel tool call, grading
per subtask, and the oracle sweep end to end.

Usage: ``FLOWSTATE_DATA=/path/to/data python perf/memoryarena_env.py [--repeats N] [--no-sweep]``.
Figures are medians over the synthetic examples (memoryarena/examples/) × N repetitions, after the
one-time per-process loads (reported apart). Episodes are the oracle fixture's, run in-process by
the real loop; grading uses the scripted judge, so no model call is timed. The sweep is
``flowstate run jobs/oracle-memoryarena.yaml`` in a fresh process (Ray start, Parquet, MLflow and the
summary included).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from machine import machine  # noqa: E402

from flowstate import METHODS, new_session, run_episode  # noqa: E402
from pipeline.benchmarks.base import EpisodeRecord, RoleCallers  # noqa: E402
from pipeline.benchmarks.memoryarena import data  # noqa: E402
from pipeline.benchmarks.memoryarena.benchmark import MEMORYARENA, MemoryArenaCell, ScriptedJudge  # noqa: E402
from pipeline.benchmarks.memoryarena.oracle import MemoryArenaOracle  # noqa: E402
from pipeline.benchmarks.memoryarena.travel_tools import TravelTools, travel_db  # noqa: E402

ENVIRONMENTS = ("formal_reasoning_math", "formal_reasoning_phys", "group_travel_planner")


def ms(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return (time.perf_counter() - start) * 1000


def summary(name: str, values: list[float], unit: str = "ms") -> str:
    return f"{name:>34}: median {statistics.median(values):8.3f} {unit}   max {max(values):8.3f} {unit}   (n={len(values)})"


def cells() -> list[MemoryArenaCell]:
    return [MemoryArenaCell(domain=d, source="examples") for d in ENVIRONMENTS]


async def setup(cell: MemoryArenaCell, task_id: str, method: str) -> None:
    """What an actor does before the first model call: the session and the environment's first request."""
    session = new_session(method, MEMORYARENA.task_prompt(cell, task_id), MEMORYARENA.tool_names(cell, task_id))
    env = await MEMORYARENA.environment(cell, task_id, RoleCallers(judge=ScriptedJudge(), tool_model=ScriptedJudge()))
    assert session.system_message.content and await env.first_request()


async def oracle_episode(cell: MemoryArenaCell, task_id: str, method: str) -> tuple[EpisodeRecord, int, float]:
    """One oracle episode through the loop: its record, its subtasks and its wall time in ms."""
    task = next(t for t in data.load_tasks(data.task_file(cell.domain, "examples"), cell.domain) if str(t.id) == task_id)
    plugin = METHODS.get(method)
    session = new_session(method, MEMORYARENA.task_prompt(cell, task_id), MEMORYARENA.tool_names(cell, task_id))
    oracle = MemoryArenaOracle(task, plugin.uses, session.options.protocol)
    start = time.perf_counter()
    env = await MEMORYARENA.environment(cell, task_id, RoleCallers(judge=ScriptedJudge(), tool_model=oracle))
    result = await run_episode(session, oracle, env)
    elapsed = (time.perf_counter() - start) * 1000
    return EpisodeRecord(transcript=env.transcript, termination=result.termination), len(task.questions), elapsed


def tool_calls() -> list[tuple[str, dict[str, Any]]]:
    """Realistic calls of each travel tool, from the synthetic tasks' gold plans."""
    calls: list[tuple[str, dict[str, Any]]] = []
    for task in data.load_tasks(data.task_file("group_travel_planner", "examples"), "group_travel_planner"):
        for day in task.base_person.daily_plans:
            city = str(day["current_city"])
            if city.startswith("from ") and " to " in city:
                origin, destination = city[5:].split(" to ", 1)
                calls += [("FlightSearch", {"origin": origin, "destination": destination, "date": "2022-03-16"}),
                          ("DistanceMatrix", {"origin": origin, "destination": destination, "mode": "taxi"})]
                city = destination
            calls += [(tool, {"city": city}) for tool in ("RestaurantSearch", "AccommodationSearch", "AttractionSearch")]
    calls.append(("CitySearch", {"state": "Texas"}))
    return calls


def oracle_sweep() -> tuple[float, str]:
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{folder}/mlflow.db"}
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pipeline.cli", "run", str(REPO / "jobs" / "oracle-memoryarena.yaml"),
                               "--out", folder], env=env, capture_output=True, text=True, cwd=REPO)
        elapsed = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"oracle sweep failed:\n{done.stderr[-2000:]}")
        line = next((x for x in done.stdout.splitlines() + done.stderr.splitlines() if x.startswith("sweep ")), "")
        return elapsed, line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--no-sweep", action="store_true", help="skip the oracle sweep")
    args = parser.parse_args()
    print(machine())

    loads = {"travel database": ms(travel_db), "prompts.json": ms(data.prompts)}
    for cell in cells():
        loads[f"{cell.domain} tasks"] = ms(lambda c=cell: MEMORYARENA.task_ids(c))
    print("one-time loads per process: " + ", ".join(f"{k} {v:.1f} ms" for k, v in loads.items()))

    pairs = [(cell, task_id, method) for cell in cells() for task_id in MEMORYARENA.task_ids(cell)
             for method in ("flowstate", "full_context", "flowstate_no_psa", "flowstate_no_isu")]
    setups = [ms(lambda p=p: asyncio.run(setup(*p))) for _ in range(args.repeats) for p in pairs]
    print(summary("episode setup (session + env)", setups))

    db = travel_db()
    tools = TravelTools(db)
    calls = tool_calls()
    by_tool: dict[str, list[float]] = {}
    for _ in range(args.repeats):
        for name, arguments in calls:
            by_tool.setdefault(name, []).append(ms(lambda n=name, a=arguments: tools.execute(n, a)))
    print(f"travel database: {len(db.flights):,} flights, {len(db.restaurants):,} restaurants, "
          f"{len(db.accommodations):,} accommodations, {len(db.attractions):,} attractions, {len(db.distance):,} distances")
    for name, values in sorted(by_tool.items()):
        print(summary(f"tool {name}", values))

    grading: dict[str, list[float]] = {}
    loop: dict[str, list[float]] = {}
    for cell, task_id, method in pairs:
        record, subtasks, elapsed = asyncio.run(oracle_episode(cell, task_id, method))
        loop.setdefault(cell.domain, []).append(elapsed / subtasks)
        for _ in range(args.repeats):
            start = time.perf_counter()
            grade = asyncio.run(MEMORYARENA.grade(cell, task_id, record, ScriptedJudge()))
            grading.setdefault(cell.domain, []).append((time.perf_counter() - start) * 1000 / subtasks)
            assert grade.success, (cell.domain, task_id, method)
    for domain in ENVIRONMENTS:
        print(summary(f"grading per subtask, {domain}", grading[domain]))
    for domain in ENVIRONMENTS:
        print(summary(f"oracle loop per subtask, {domain}", loop[domain]))

    if not args.no_sweep:
        seconds, line = oracle_sweep()
        print(f"oracle sweep (flowstate run jobs/oracle-memoryarena.yaml, fresh process): {seconds:.1f} s  [{line}]")


if __name__ == "__main__":
    main()
