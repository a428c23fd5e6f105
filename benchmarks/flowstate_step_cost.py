"""Per-step cost of the FlowState runtime as the repository grows.

Prints medians (microseconds) of each part of one step — parse the model output, validate the
delta and access (rules only), apply (validate + commit + disclose), serialize the next prompt —
for repositories of 10, 100, 1,000 and 10,000 historical nodes. Target: a whole step under 1 ms
at 1,000 nodes, and validate/commit/disclose flat in repository size.

Run: python benchmarks/flowstate_step_cost.py
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from flowstate import (
    FlowStateOptions,
    FlowStateSession,
    Repository,
    RequestEnd,
    RequestOutcome,
    RequestStart,
    TaskPrompt,
    parse_output,
)
from flowstate.rules import check_access, check_delta_op
from flowstate.state import AddOp, UpdateOp

NODES_PER_REQUEST = 10
STEPS_PER_REQUEST = 20
REPEATS = 400


def _output(step: int) -> str:
    """A typical step: add one node with two refs, update it, one access, one tool call."""
    node = f"cur_{step}"
    delta = [
        {"state_set": "attribute", "operation": "add", "state_id": node, "summary": f"fact {step}",
         "value": {"price": step, "currency": "USD"}, "refs": [{"rel": "derives", "state_id": "h_0_0"},
                                                              {"rel": "supports", "state_id": "h_0_1"}]},
        {"operation": "update", "state_id": node, "summary": f"fact {step} (checked)"},
    ]
    focus = [{"target_id": f"h_{step % 7}_{step % NODES_PER_REQUEST}", "reason": "need the details"}]
    calls = [{"name": "get_order_details", "arguments": {"order_id": f"#W{step}"}}]
    return (f"<state_focus>{json.dumps(focus)}</state_focus>\n<state_delta>{json.dumps(delta)}</state_delta>\n"
            f"<tool_calls>{json.dumps(calls)}</tool_calls>\n<assistant_message>{{\"content\": null}}</assistant_message>")


def _session(repository: Repository | None = None) -> FlowStateSession:
    return FlowStateSession(TaskPrompt(task_policy="policy", available_tools="tools"), FlowStateOptions(),
                            repository=repository)


def _start(k: int, query: str) -> RequestStart:
    return RequestStart(index=k, query=query, memory_query=query)


async def _history(nodes: int) -> Repository:
    session = _session()
    for k in range(nodes // NODES_PER_REQUEST):
        await session.begin_request(_start(k + 1, f"request {k}"))
        ops = [{"state_set": "knowledge", "operation": "add", "state_id": f"h_{k}_{i}", "summary": f"historical state {k}/{i}",
                "value": {"k": k, "i": i}, "refs": [{"rel": "follows", "state_id": f"h_{k}_{i - 1}"}] if i else []}
               for i in range(NODES_PER_REQUEST)]
        session.runtime.apply(ops, [])
        await session.end_request(RequestOutcome(index=k + 1, query="", ended=RequestEnd.RESPONSE, final_response=None,
                                                 steps=[]))
    return session.runtime.repository


def _median_us(samples: list[int]) -> float:
    return statistics.median(samples) / 1000


async def measure(nodes: int) -> dict[str, float]:
    repository = await _history(nodes)
    texts = [_output(i) for i in range(STEPS_PER_REQUEST)]
    timings: dict[str, list[int]] = {"parse": [], "validate": [], "apply": [], "serialize": [], "step": []}

    def timed(name: str, fn: Callable[..., Any], *args: Any) -> Any:
        start = time.perf_counter_ns()
        value = fn(*args)
        timings[name].append(time.perf_counter_ns() - start)
        return value

    async def atimed(name: str, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        start = time.perf_counter_ns()
        value = await fn(*args)
        timings[name].append(time.perf_counter_ns() - start)
        return value

    def validate(ops: list[Any], focus: list[Any], runtime: Any) -> object:
        return [check_delta_op(op, runtime) for op in ops[:1]], [check_access(f["target_id"], runtime) for f in focus]

    rounds = max(1, REPEATS // STEPS_PER_REQUEST)
    for r in range(rounds):
        # A fresh session over the same history each round; nothing is persisted, so the
        # repository keeps exactly ``nodes`` nodes.
        session = _session(repository)
        runtime = session.runtime
        await session.begin_request(_start(len(repository.requests) + 1, f"bench {r}"))
        for i, text in enumerate(texts):
            start = time.perf_counter_ns()
            parsed = timed("parse", parse_output, text)
            ops = [AddOp.model_validate(parsed.state_delta[0]), UpdateOp.model_validate(parsed.state_delta[1])]
            timed("validate", validate, ops, parsed.state_focus, runtime)
            await atimed("apply", session.apply, parsed)
            await session.add_observation(i + 1, '{"order_id": "#W1", "status": "pending"}', "raw")
            await atimed("serialize", session.messages, None)
            timings["step"].append(time.perf_counter_ns() - start)
    return {name: _median_us(values) for name, values in timings.items()}


def main() -> None:
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{platform.system()} {platform.release()}")
    print("median microseconds per step (typical step: 2 ops, 1 access, 1 tool call)")
    header = f"{'nodes':>7} {'parse':>8} {'validate':>9} {'apply':>8} {'serialize':>10} {'step':>8}"
    print(header)
    for nodes in (10, 100, 1_000, 10_000):
        m = asyncio.run(measure(nodes))
        print(f"{nodes:>7} {m['parse']:>8.1f} {m['validate']:>9.1f} {m['apply']:>8.1f} {m['serialize']:>10.1f} {m['step']:>8.1f}")


if __name__ == "__main__":
    main()
