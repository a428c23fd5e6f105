"""DuckDB query time at scale: 1 M and 10 M synthetic agent-step rows, per-episode files vs compacted.

For each size it prints the time of every shipped query (sql/*.sql), the compaction time, the
time of ``flowstate verify`` (every file hashed) and the MLflow logging time per cell, with the
machine it ran on. Target: every query under 2 s on 10 M step
rows on 2 cores once compacted.

Layouts:
- "small": one file per table and episode, as the store writes them (sizes up to --small-max rows);
- "parts": many medium files per cell (what a sweep compacted at several resumes leaves) for sizes
  too large to write episode by episode here; compaction then merges them per cell.

Rows are synthetic but shaped like real ones: 2 domains × 3 methods × 2 models = 12 cells, episodes of
3–8 requests and 10–60 steps, ISU ops and rejections, PSA disclosures, tool calls, token counts,
latencies; messages (one per agent step plus one user-simulator call per request) and transcripts.
Text columns are drawn from small pools, so files are smaller than real ones (no query reads them).

Run: python perf/sql_scale.py [--sizes 1000000 10000000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.analysis.query import connect, list_queries, query_table
from pipeline.store.compact import compact
from pipeline.store.files import PART_META_KEY, PART_PREFIX
from pipeline.store.schema import SCHEMA_VERSION
from pipeline.store.tables import ANALYSIS_SCHEMAS
from pipeline.store.verify import verify_sweep
from pipeline.store.writer import encode_small_parquet, write_encoded_atomic, write_parquet_atomic

CELLS = [(d, m, a) for d in ("airline", "retail") for m in ("full_context", "flowstate", "flowstate-json")
         for a in ("model-a", "model-b")]
SWEEP = "scale-0123456789"
REASONS = ["malformed", "id_in_use", "not_in_active_state", "not_current_request", "unknown_ref", "not_accessible"]
TOOLS = ["get_user_details", "get_reservation_details", "search_direct_flight", "update_reservation_flights",
         "calculate", "get_order_details", "modify_pending_order_items"]


def machine() -> str:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {mem:.0f} GiB RAM, " \
           f"Python {platform.python_version()}"


def _pool(prefix: str, n: int, width: int) -> pa.Array:
    return pa.array([f"{prefix} {i} " + "x" * width for i in range(n)])


def _lists(counts: np.ndarray, values: pa.Array) -> pa.Array:
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), values)


def _structs(rng: np.random.Generator, n: int, fields: dict[str, pa.Array]) -> pa.Array:
    return pa.StructArray.from_arrays([f.take(pa.array(rng.integers(0, len(f), n))) for f in fields.values()],
                                      names=list(fields))


class Cell:
    """The rows of one cell's episodes, generated column by column."""

    def __init__(self, rng: np.random.Generator, index: int, episodes: int, key: tuple[str, str, str]) -> None:
        self.rng, (self.domain, self.method, self.model) = rng, key
        self.cell_id = f"cell{index:08d}"
        self.episode_ids = np.array([f"ep{index:02d}{i:010d}" for i in range(episodes)])
        self.requests = rng.integers(3, 9, episodes)
        self.steps = np.maximum(self.requests, rng.integers(10, 61, episodes))

    def ids(self, episode_index: np.ndarray) -> dict[str, pa.Array]:
        n = len(episode_index)
        label = f"taubench.{self.domain}.{self.method}.{self.model}"
        const = {"schema_version": pa.array(np.full(n, SCHEMA_VERSION, np.int16)), "sweep_id": SWEEP,
                 "cell_id": self.cell_id, "cell": label, "benchmark": "taubench", "domain": self.domain,
                 "method": self.method, "model": self.model}
        cols = {k: v if isinstance(v, pa.Array) else pa.array([v] * n) for k, v in const.items()}
        cols["episode_id"] = pa.array(self.episode_ids[episode_index])
        cols["task_id"] = pa.array((episode_index // 3).astype(str))  # 3 trials of each task
        cols["trial"] = pa.array((episode_index % 3).astype(np.int32))
        return cols

    def table(self, name: str, columns: dict[str, pa.Array]) -> pa.Table:
        schema = ANALYSIS_SCHEMAS[name]
        n = len(next(iter(columns.values())))
        arrays = [columns[f.name] if f.name in columns else pa.nulls(n, f.type) for f in schema]
        # messages repeats the name "model": both take the same value here
        return pa.Table.from_arrays([a.cast(f.type) for a, f in zip(arrays, schema, strict=True)], schema=schema)

    def steps_table(self) -> pa.Table:
        rng, n_eps = self.rng, len(self.episode_ids)
        ep = np.repeat(np.arange(n_eps), self.steps)
        n = len(ep)
        row = np.arange(n)
        pos = row - np.repeat(np.cumsum(self.steps) - self.steps, self.steps)  # step index within the episode
        request = (pos * self.requests[ep] // self.steps[ep] + 1).astype(np.int32)
        first = np.concatenate([[True], (request[1:] != request[:-1]) | (ep[1:] != ep[:-1])])
        step = (row - np.maximum.accumulate(np.where(first, row, 0)) + 1).astype(np.int32)
        proposed = rng.integers(0, 5, n)
        rejected = np.minimum(proposed, rng.binomial(1, 0.1, n) * rng.integers(1, 3, n))
        accepted = proposed - rejected
        ops = {"operation": pa.array(["add", "update", "remove"]), "state_id": _pool("s", 500, 0)}
        rejection = {**ops, "reason": pa.array(REASONS), "detail": _pool("because", 20, 30)}
        focus = rng.binomial(1, 0.3, n) * rng.integers(1, 3, n)
        focus_rejected = np.minimum(focus, rng.binomial(1, 0.1, n))
        disclosed = focus - focus_rejected
        source = np.maximum(1, np.repeat(request, disclosed) - rng.integers(0, 4, disclosed.sum())).astype(np.int32)
        calls = rng.binomial(1, 0.6, n)
        errors, warnings = rng.binomial(1, 0.03, n), rng.binomial(1, 0.05, n)
        states = _pool("s", 500, 0)
        tokens = rng.integers(2000, 12000, n)
        cols = self.ids(ep) | {
            "request": pa.array(request), "step": pa.array(step),
            "query": pc.if_else(pa.array(first), _pool("user request", 50, 80).take(pa.array(rng.integers(0, 50, n))),
                                pa.nulls(n, pa.string())),
            "n_proposed_ops": pa.array(proposed.astype(np.int32)),
            "proposed_ops_json": _pool('[{"operation": "add", "state_id"', 200, 120).take(pa.array(rng.integers(0, 200, n))),
            "accepted_ops": _lists(accepted, _structs(rng, int(accepted.sum()), ops)),
            "accepted_ops_json": _pool('[{"operation": "add"', 200, 100).take(pa.array(rng.integers(0, 200, n))),
            "rejected_ops": _lists(rejected, _structs(rng, int(rejected.sum()), rejection)),
            "focus_requested": _lists(focus, states.take(pa.array(rng.integers(0, 500, focus.sum())))),
            "focus_accepted": _lists(disclosed, states.take(pa.array(rng.integers(0, 500, disclosed.sum())))),
            "focus_rejected": _lists(focus_rejected, _structs(rng, int(focus_rejected.sum()), rejection)),
            "disclosed": _lists(disclosed, states.take(pa.array(rng.integers(0, 500, disclosed.sum())))),
            "disclosed_from": _lists(disclosed, pa.array(source)),
            "tool_calls": _lists(calls, _structs(rng, int(calls.sum()), {
                "id": _pool("call", 1000, 0), "name": pa.array(TOOLS), "arguments_json": _pool('{"id":', 300, 20)})),
            "n_tool_calls": pa.array(calls.astype(np.int32)),
            "tool_errors": pa.array((calls * rng.binomial(1, 0.05, n)).astype(np.int32)),
            "observation_chars": pa.array(calls * rng.integers(50, 4000, n)),
            "assistant_message": pc.if_else(pa.array(rng.random(n) < 0.4),
                                            _pool("Sure, I can help", 100, 60).take(pa.array(rng.integers(0, 100, n))),
                                            pa.nulls(n, pa.string())),
            "parse_errors": _lists(errors, _pool("unclosed tag", 5, 10).take(pa.array(rng.integers(0, 5, errors.sum())))),
            "protocol_warnings": _lists(warnings, _pool("repaired", 5, 10).take(
                pa.array(rng.integers(0, 5, warnings.sum())))),
            "prompt_tokens": pa.array(tokens), "completion_tokens": pa.array(rng.integers(50, 400, n)),
            "cached_tokens": pa.array((tokens * rng.uniform(0.5, 0.9, n)).astype(np.int64)),
            "latency_s": pa.array(rng.gamma(2.0, 1.0, n)), "finish_reason": pa.array(["stop"] * n),
            "prompt_chars": pa.array(tokens * 4), "active_nodes": pa.array(rng.integers(0, 30, n).astype(np.int32)),
            "active_state_tokens": pa.array(rng.integers(0, 3000, n)),
            "index_states": pa.array(rng.integers(0, 80, n).astype(np.int32)),
        }
        cols["n_parse_errors"] = pc.list_value_length(cols["parse_errors"]).cast(pa.int32())
        return self.table("steps", cols)

    def episodes_table(self, steps: pa.Table) -> pa.Table:
        rng, n = self.rng, len(self.episode_ids)
        per_episode = steps.group_by("episode_id", use_threads=False).aggregate(
            [("prompt_tokens", "sum"), ("completion_tokens", "sum"), ("cached_tokens", "sum")])
        reward = (rng.random(n) < 0.6).astype(float)
        failed = rng.random(n) < 0.01
        now = np.datetime64("2026-01-01T00:00:00", "us") + np.arange(n).astype("timedelta64[s]") * 60
        cols = self.ids(np.arange(n)) | {
            "seed": pa.array(np.full(n, 300)), "status": pa.array(np.where(failed, "failed", "completed")),
            "attempts": pa.array(np.ones(n, np.int32)),
            "termination": pa.array(np.where(failed, "infrastructure_error",
                                             rng.choice(["user_stop", "agent_stop", "max_steps"], n, p=[.8, .15, .05]))),
            "reward": pa.array(np.where(failed, np.nan, reward), from_pandas=True),
            "success": pa.array(np.where(failed, None, reward == 1.0)), "graded": pa.array(~failed),
            "grading_basis": pa.array(["task: DB×COMMUNICATE"] * n),
            "metrics": pa.array([None if f else {"db": float(max(r, d)), "communicate": 1.0, "action": float(a)}
                                 for f, r, d, a in zip(failed, reward, rng.random(n) < 0.2, rng.random(n) < 0.5, strict=True)],
                                type=pa.map_(pa.string(), pa.float64())),
            "n_requests": pa.array(self.requests.astype(np.int32)), "n_steps": pa.array(self.steps.astype(np.int32)),
            "agent_prompt_tokens": per_episode["prompt_tokens_sum"],
            "agent_completion_tokens": per_episode["completion_tokens_sum"],
            "agent_cached_tokens": per_episode["cached_tokens_sum"],
            "tokens": pc.add(per_episode["prompt_tokens_sum"], per_episode["completion_tokens_sum"]),
            "started_at": pa.array(now).cast(pa.timestamp("us", tz="UTC")),
            "finished_at": pa.array(now + 50_000_000).cast(pa.timestamp("us", tz="UTC")),
            "duration_s": pa.array(np.full(n, 50.0)), "code_version": pa.array(["bench"] * n),
            "grading_json": _pool('{"reward": 1.0, "basis": "task"', 50, 800).take(pa.array(rng.integers(0, 50, n))),
            "repository_json": _pool('{"nodes": [', 50, 2000).take(pa.array(rng.integers(0, 50, n))),
        }
        return self.table("episodes", cols)

    def messages_table(self, steps: pa.Table) -> pa.Table:
        """One row per agent step, then one user-simulator call per request."""
        rng = self.rng
        agent = steps.select(["episode_id", "request", "step", "prompt_tokens", "completion_tokens", "latency_s"])
        firsts = steps.filter(pc.equal(steps["step"], 1)).select(["episode_id", "request"])
        index = {e: i for i, e in enumerate(self.episode_ids)}
        tables = []
        for caller, part in (("agent", agent), ("user_simulator", firsts)):
            n = part.num_rows
            ep = np.array([index[e] for e in part["episode_id"].to_pylist()])
            cols = self.ids(ep) | {
                "seq": pa.array(np.arange(n, dtype=np.int32)), "caller": pa.array([caller] * n),
                "request": part["request"], "prompt_json": _pool('[{"role": "system", "content": "', 100, 1000).take(
                    pa.array(rng.integers(0, 100, n))),
                "completion": _pool("<state_delta>", 100, 200).take(pa.array(rng.integers(0, 100, n))),
                "latency_s": part["latency_s"] if caller == "agent" else pa.array(rng.gamma(2.0, 0.3, n)),
                "prompt_tokens": part["prompt_tokens"] if caller == "agent" else pa.array(rng.integers(500, 3000, n)),
                "completion_tokens": part["completion_tokens"] if caller == "agent" else pa.array(rng.integers(10, 80, n)),
                "served_by": pa.array([f"http://10.0.0.{i % 4}:8000/v1" for i in range(n)]),
            }
            if caller == "agent":
                cols["step"] = part["step"]
            tables.append(self.table("messages", cols))
        return pa.concat_tables(tables).sort_by("episode_id")

    def transcript_table(self, steps: pa.Table) -> pa.Table:
        """A user turn per request, an assistant turn per step, a tool result per tool call."""
        rng = self.rng
        keep = steps.select(["episode_id", "request", "n_tool_calls"])
        index = {e: i for i, e in enumerate(self.episode_ids)}
        ep = np.array([index[e] for e in keep["episode_id"].to_pylist()])
        n = len(ep)
        roles = np.where(rng.random(n) < 0.2, "user", np.where(keep["n_tool_calls"].to_numpy() > 0, "tool", "assistant"))
        cols = self.ids(ep) | {
            "seq": pa.array(np.arange(n, dtype=np.int32)), "request": keep["request"], "role": pa.array(roles),
            "content": _pool("text", 200, 300).take(pa.array(rng.integers(0, 200, n))),
            "error": pa.array(np.zeros(n, bool)),
        }
        return self.table("transcript", cols)


def generate(root: Path, rows: int, small: bool, seed: int = 7, cells: list[tuple[str, str, str]] = CELLS,
             parts: int = 100) -> tuple[int, int]:
    """Write a sweep of about ``rows`` step rows over ``cells`` (domain, method, model), per episode
    (``small``) or in up to ``parts`` parts per table and cell (1: as compaction leaves them);
    returns (step rows, files)."""
    rng = np.random.default_rng(seed)
    per_cell = max(1, round(rows / len(cells) / 35))  # ~35 steps per episode
    sweep = root / SWEEP
    total = files = 0
    for i, key in enumerate(cells):
        cell = Cell(rng, i, per_cell, key)
        steps = cell.steps_table()
        tables = {"steps": steps, "messages": cell.messages_table(steps), "transcript": cell.transcript_table(steps),
                  "episodes": cell.episodes_table(steps)}
        failed = set(pc.filter(tables["episodes"]["episode_id"], pc.equal(tables["episodes"]["status"], "failed")).to_pylist())
        total += steps.num_rows
        for name, table in tables.items():  # episodes last, as the store writes
            if name != "episodes":  # a failed episode has only its episodes row
                table = table.filter(pc.invert(pc.is_in(table["episode_id"], pa.array(sorted(failed) or [""]))))
            folder = sweep / name / f"cell={cell.cell_id}"
            for path, chunk in _split(folder, table, small, parts):
                episodes = sorted(set(chunk["episode_id"].to_pylist()))
                if small:
                    write_encoded_atomic(encode_small_parquet(path, chunk, episodes))  # as the store writes them
                else:
                    meta = {PART_META_KEY: json.dumps({"episodes": episodes}).encode()}
                    write_parquet_atomic(path, chunk.replace_schema_metadata(meta), episodes)
                files += 1
    (sweep / "manifest.json").write_text(json.dumps({"sweep_id": SWEEP, "job_name": "scale", "code_version": "bench",
                                                     "job": {"trials": 3}, "cells": []}))
    return total, files


def _split(folder: Path, table: pa.Table, small: bool, parts: int) -> Iterator[tuple[Path, pa.Table]]:
    """Per episode (small files), or up to ``parts`` parts per cell (episodes never split)."""
    ids = table["episode_id"].to_numpy(zero_copy_only=False)
    bounds = np.flatnonzero(np.concatenate([[True], ids[1:] != ids[:-1], [True]]))
    if small:
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            yield folder / f"{ids[a]}.parquet", table.slice(a, b - a)
        return
    groups = np.array_split(bounds[:-1], min(parts, len(bounds) - 1))
    for k, group in enumerate(groups):
        a, b = group[0], bounds[np.searchsorted(bounds, group[-1]) + 1]
        yield folder / f"{PART_PREFIX}{k:020d}-bench.parquet", table.slice(a, b - a)


def time_queries(sweep: Path, names: list[str], repeats: int) -> dict[str, float]:
    """Best of ``repeats`` runs per query; "(open views)" is listing the files and reading part footers."""
    times: dict[str, float] = {}
    started = time.perf_counter()
    with connect(sweep) as con:
        times["(open views)"] = time.perf_counter() - started
        for name in names:
            best = float("inf")
            for _ in range(repeats):
                t = time.perf_counter()
                query_table(con, name, baseline="full_context")
                best = min(best, time.perf_counter() - t)
            times[name] = best
    return times


def time_tracking(sweep: Path, root: Path) -> float:
    from mlflow import MlflowClient

    from pipeline.tracking.mlflow_log import log_sweep

    uri = f"sqlite:///{root / 'mlflow.db'}"
    # artifacts next to the store, not in ./mlruns of the working directory
    MlflowClient(uri).create_experiment("sql-scale", artifact_location=(root / "artifacts").as_uri())
    result = log_sweep(sweep, experiment="sql-scale", tracking_uri=uri, trace_samples_per_cell=3)
    return result.duration_s / max(1, len(result.child_run_ids))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--small-max", type=int, default=1_000_000, help="largest size written as per-episode files")
    parser.add_argument("--uncompacted", nargs="*", default=["pass_rate", "isu_ops", "latency"],
                        help="queries also timed before compaction (each reads every small file: minutes at 1 M rows)")
    parser.add_argument("--no-mlflow", action="store_true")
    parser.add_argument("--keep", type=Path, help="write here and keep the data (default: a temporary folder)")
    args = parser.parse_args()
    print(f"machine: {machine()}", flush=True)
    for rows in args.sizes:
        root = Path(tempfile.mkdtemp(prefix="flowstate-sql-scale-", dir=args.keep))
        try:
            small = rows <= args.small_max
            t = time.perf_counter()
            steps, files = generate(root, rows, small)
            size = sum(f.stat().st_size for f in root.rglob("*.parquet")) / 2**20
            print(f"\n== {steps:,} step rows, {files:,} files ({'per episode' if small else 'parts'}), "
                  f"{size:,.0f} MiB, generated in {time.perf_counter() - t:.0f} s", flush=True)
            before = time_queries(root / SWEEP, args.uncompacted, repeats=1)
            report = compact(root / SWEEP)
            print(f"compaction: {report.files_merged:,} files -> {report.parts_written} parts, "
                  f"{report.rows_written:,} rows in {report.duration_s:.1f} s", flush=True)
            verified = verify_sweep(root / SWEEP)
            print(f"flowstate verify: {verified.checked:,} files checked in {verified.duration_s:.1f} s "
                  f"({len(verified.problems)} problems)", flush=True)
            after = time_queries(root / SWEEP, list_queries(), repeats=2)
            print(f"{'query':<24}{'uncompacted s':>15}{'compacted s':>13}   (uncompacted: one run; compacted: best of 2)")
            for name in after:
                flag = "" if after[name] < 2 else "  (over 2 s)"
                print(f"{name:<24}{before.get(name, math.nan):>15.3f}{after[name]:>13.3f}{flag}", flush=True)
            if not args.no_mlflow:
                print(f"mlflow log_sweep: {time_tracking(root / SWEEP, root):.2f} s per cell "
                      f"(metrics, 3 traces, summary tables, report; {len(CELLS)} cells)")
        finally:
            if args.keep is None:
                shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
