"""Per-episode overhead of the τ-bench environment: DB reset, canonical hash, grading.

Usage: ``FLOWSTATE_DATA=/path/to/data python perf/taubench_env.py [--repeats N]``.
Every figure is a median over all 164 tasks × N repetitions, measured after the one-time
per-process load (reported separately). Grading uses the DB × COMMUNICATE basis so that no
judge LLM call is timed; the oracle transcripts come from the gold actions.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import time
from collections.abc import Callable

from flowstate.environment import ToolCall
from pipeline.benchmarks.taubench import (
    ScriptedUser,
    Task,
    TauEpisode,
    fresh_db,
    gold_db_hash,
    grade,
    initial_db,
    load_tasks,
    toolkit_for,
)
from pipeline.benchmarks.transcript import TranscriptMessage


def ram_gib() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return (time.perf_counter() - start) * 1000


async def oracle_transcript(task: Task) -> tuple[list[TranscriptMessage], str]:
    env = TauEpisode(task, ScriptedUser(task))
    await env.first_request()
    for action in task.evaluation_criteria.actions:
        await env.execute([ToolCall(name=action.name, arguments=action.arguments)])
    reply = await env.respond("Done. " + " ".join(task.evaluation_criteria.communicate_info))
    while reply is not None:
        reply = await env.respond("Anything else?")
    return env.transcript, env.termination or "none"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()

    load_ms = {domain: timed(lambda d=domain: initial_db(d).canonical_hash) for domain in ("airline", "retail")}
    tasks = [task for domain in ("airline", "retail") for task in load_tasks(domain)]
    transcripts = {id(task): asyncio.run(oracle_transcript(task)) for task in tasks}
    for task in tasks:
        gold_db_hash(task)  # gold replays are cached once per task and process

    reset, hashing, grading, total = [], [], [], []
    for _ in range(args.repeats):
        for task in tasks:
            transcript, termination = transcripts[id(task)]
            start = time.perf_counter()
            db = fresh_db(task.domain)
            reset_done = time.perf_counter()
            tools = toolkit_for(db)
            for action in task.evaluation_criteria.actions:  # the episode itself (not timed)
                tools.execute(ToolCall(name=action.name, arguments=action.arguments))
            hash_start = time.perf_counter()
            db.canonical_hash()
            hash_done = time.perf_counter()
            info = asyncio.run(grade(task, transcript, termination, basis="classic"))
            grade_done = time.perf_counter()
            assert info.reward == 1.0, (task.domain, task.id)
            reset.append((reset_done - start) * 1000)
            hashing.append((hash_done - hash_start) * 1000)
            grading.append((grade_done - hash_done) * 1000)
            total.append((reset_done - start + grade_done - hash_start) * 1000)

    print(f"machine: {os.cpu_count()} cores, {ram_gib():.1f} GiB RAM, Python {platform.python_version()} "
          f"({platform.machine()}, {platform.system()})")
    print(f"one-time load + first hash per process: airline {load_ms['airline']:.0f} ms, "
          f"retail {load_ms['retail']:.0f} ms")
    print(f"episodes measured: {len(total)} ({len(tasks)} tasks x {args.repeats})")
    for name, values in (("DB reset", reset), ("canonical hash", hashing), ("grading", grading),
                         ("reset + hash + grade", total)):
        p95 = statistics.quantiles(values, n=20)[-1]
        print(f"{name:>22}: median {statistics.median(values):7.3f} ms   p95 {p95:7.3f} ms   max {max(values):7.3f} ms")


if __name__ == "__main__":
    main()
