"""Per-step cost of the FlowState runtime as the repository grows, and along one episode of 10,000 steps.

Part 1 prints medians (microseconds) of each part of one step — parse the model output, validate
the delta and access (rules only), apply (validate + commit + disclose), serialize the next prompt —
for repositories of 10, 100, 1,000 and 10,000 historical nodes. Target: a whole step under 1 ms at
1,000 nodes, and validate/commit/disclose flat in repository size.

Part 2 runs whole episodes through the loop (``run_episode``: prompt, parse, ISU/PSA, tool,
observation, records) with a scripted policy and environment (benchmark fixtures), and prints the
median time of the steps around step 100, 1,000 and 10,000 (everything between two model calls),
with the prompt's size there and the text of every prompt, which the loop keeps for the messages
table until the episode ends: one episode of 500 requests × 20 steps (one state kept per request,
so the index grows), and one of a single request of 10,000 steps; the median of ``--repeats``
episodes. Target: flat per-step cost.

Part 2's times are the CPU time of the thread (a shared machine's other work does not count).

Run: python perf/flowstate_step_cost.py [--long-steps 10000] [--repeats 3] [--skip-part1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from flowstate import (
    ChatMessage,
    Completion,
    Environment,
    FlowStateOptions,
    FlowStateSession,
    LoopLimits,
    Repository,
    RequestEnd,
    RequestOutcome,
    RequestStart,
    TaskPrompt,
    ToolCall,
    ToolResult,
    parse_output,
    run_episode,
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


# -- part 2: one long episode -----------------------------------------------------------------------
class ScriptedSteps:
    """BENCHMARK FIXTURE (a policy): ``per_request`` steps per request. Each step adds a state that
    derives from the step before's, removes that one, discloses a state kept by an earlier request
    and calls a tool; the request's last step keeps its state and answers. Records when each call
    came and went, and the prompt's size."""

    def __init__(self, per_request: int) -> None:
        self.per_request = per_request
        self.calls = 0
        self.arrived: list[int] = []
        self.left: list[int] = []
        self.prompt_chars: list[int] = []

    async def complete(self, messages: Sequence[ChatMessage], *, json_schema: Any = None) -> Completion:
        self.arrived.append(time.thread_time_ns())
        self.prompt_chars.append(sum(len(m.content) for m in messages))
        k, t = divmod(self.calls, self.per_request)
        k, t = k + 1, t + 1
        self.calls += 1
        last = t == self.per_request
        node = f"keep_{k}" if last else f"cur_{k}_{t}"
        refs = [{"rel": "derives", "state_id": f"cur_{k}_{t - 1}"}] if t > 1 else []
        delta = [{"state_set": "attribute", "operation": "add", "state_id": node, "summary": f"fact {k}/{t}",
                  "value": {"price": t, "currency": "USD"}, "refs": refs}]
        if t > 1:
            delta.append({"operation": "remove", "state_id": f"cur_{k}_{t - 1}"})
        focus = [{"target_id": f"keep_{(k * 7) % (k - 1) + 1}", "reason": "need the details"}] if k > 1 else []
        calls = [] if last else [{"name": "get_order_details", "arguments": {"order_id": f"#W{t}"}}]
        message = json.dumps({"content": f"done {k}" if last else None})
        text = (f"<state_focus>{json.dumps(focus)}</state_focus>\n<state_delta>{json.dumps(delta)}</state_delta>\n"
                f"<tool_calls>{json.dumps(calls)}</tool_calls>\n<assistant_message>{message}</assistant_message>")
        self.left.append(time.thread_time_ns())
        return Completion(text=text)


class ScriptedTask(Environment):
    """BENCHMARK FIXTURE (an environment): ``requests`` requests; every tool call returns a short record."""

    def __init__(self, requests: int) -> None:
        self.requests = requests
        self.current = 1

    @property
    def termination(self) -> str | None:
        return None

    async def first_request(self) -> str | None:
        return "request 1: look up the order"

    async def execute(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        return [ToolResult(content=json.dumps({"order_id": c.arguments.get("order_id"), "status": "pending"}))
                for c in calls]

    async def respond(self, message: str) -> str | None:
        self.current += 1
        return f"request {self.current}: look up the next order" if self.current <= self.requests else None


async def long_episode(steps: int, per_request: int) -> ScriptedSteps:
    policy = ScriptedSteps(per_request)
    result = await run_episode(_session(), policy, ScriptedTask(steps // per_request),
                               limits=LoopLimits(max_steps_per_request=per_request))
    assert len(result.steps) == steps and not any(s.rejected_ops for s in result.steps), "the script went wrong"
    return policy


def step_costs(policy: ScriptedSteps, at: int, window: int = 20) -> tuple[float, int]:
    """Median microseconds between the model calls of the ``window`` steps before step ``at``, and the
    prompt's size at step ``at``."""
    first = max(1, at - window)
    gaps = [(policy.arrived[i] - policy.left[i - 1]) / 1000 for i in range(first, at)]
    return statistics.median(gaps), policy.prompt_chars[at - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--long-steps", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-part1", action="store_true")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{platform.system()} {platform.release()}")
    if not args.skip_part1:
        part1()
    marks = [m for m in (100, 1_000, 10_000) if m <= args.long_steps]
    print("\none episode through the loop: median µs per step (between two model calls) at step n, prompt chars there")
    for label, per_request in ((f"{args.long_steps // 20:,} requests × 20 steps", 20),
                               (f"1 request × {args.long_steps:,} steps", args.long_steps)):
        runs = [asyncio.run(long_episode(args.long_steps, per_request)) for _ in range(args.repeats)]
        cells = [(statistics.median(step_costs(p, m)[0] for p in runs), step_costs(runs[0], m)[1]) for m in marks]
        print(f"{label:>26}: " + " | ".join(f"step {m:,}: {us:,.0f} µs, {chars:,} chars" for m, (us, chars) in
                                            zip(marks, cells, strict=True))
              + f" | prompts held until the episode ends: {sum(runs[0].prompt_chars) / 2**20:,.0f} MiB of text")


def part1() -> None:
    print("median microseconds per step (typical step: 2 ops, 1 access, 1 tool call)")
    header = f"{'nodes':>7} {'parse':>8} {'validate':>9} {'apply':>8} {'serialize':>10} {'step':>8}"
    print(header)
    for nodes in (10, 100, 1_000, 10_000):
        m = asyncio.run(measure(nodes))
        print(f"{nodes:>7} {m['parse']:>8.1f} {m['validate']:>9.1f} {m['apply']:>8.1f} {m['serialize']:>10.1f} {m['step']:>8.1f}")


if __name__ == "__main__":
    main()
