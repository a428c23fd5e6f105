"""Recorded episodes as MLflow traces: one span per agent step, with its model call, ISU, PSA and
tool calls as child spans, timed from the recorded latencies (no live model involved)."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime
from typing import Any

import duckdb
from mlflow import MlflowClient
from mlflow.entities import SpanType

Row = dict[str, Any]
EPISODE_TAG = "flowstate.episode_id"
CELL_TAG = "flowstate.cell_id"
_NS = 1_000_000_000


def _ns(t: datetime) -> int:
    return int(t.timestamp() * _NS)


def _json(text: str | None) -> Any:
    try:
        return json.loads(text) if text else None
    except json.JSONDecodeError:
        return text


def episode_rows(con: duckdb.DuckDBPyConnection, episode_ids: list[str]) -> dict[str, dict[str, list[Row]]]:
    """steps, agent messages and tool results of the given episodes, grouped by episode id."""
    queries = {
        "steps": "SELECT * FROM steps WHERE episode_id IN (SELECT unnest($ids)) ORDER BY request, step",
        "messages": "SELECT episode_id, request, step, prompt_json, completion FROM messages "
                    "WHERE caller = 'agent' AND episode_id IN (SELECT unnest($ids))",
        "tools": "SELECT episode_id, tool_call_id, content, error FROM transcript "
                 "WHERE role = 'tool' AND episode_id IN (SELECT unnest($ids))",
    }
    grouped: dict[str, dict[str, list[Row]]] = defaultdict(lambda: defaultdict(list))
    for kind, sql in queries.items():
        for row in con.sql(sql, params={"ids": episode_ids}).to_arrow_table().to_pylist():
            grouped[row["episode_id"]][kind].append(row)
    return grouped


class _Spans:
    def __init__(self, client: MlflowClient, trace_id: str) -> None:
        self.client, self.trace_id = client, trace_id

    def add(self, parent: str, name: str, span_type: str, start: int, end: int, *, inputs: Any = None,
            outputs: Any = None, attributes: dict[str, Any] | None = None) -> str:
        span = self.client.start_span(name, trace_id=self.trace_id, parent_id=parent, span_type=span_type,
                                      inputs=inputs, attributes=attributes, start_time_ns=start)
        self.client.end_span(self.trace_id, span.span_id, outputs=outputs, end_time_ns=end)
        return span.span_id


def _step(spans: _Spans, root: str, step: Row, call: Row | None, tools: dict[str, Row], start: int) -> int:
    """The spans of one agent step; returns when it ended."""
    end = start + max(1, int((step["latency_s"] or 0) * _NS))
    name = f"request {step['request']} · step {step['step']}"
    span = spans.client.start_span(
        name, trace_id=spans.trace_id, parent_id=root, span_type=SpanType.CHAIN, start_time_ns=start,
        inputs={"query": step["query"]} if step["query"] else None,
        attributes={k: step[k] for k in ("request", "step", "active_nodes", "active_state_tokens", "index_states",
                                         "prompt_tokens", "completion_tokens", "cached_tokens", "n_parse_errors")})
    parent = span.span_id
    spans.add(parent, "model call", SpanType.LLM, start, end,
              inputs={"messages": _json(call["prompt_json"])} if call else None,
              outputs={"completion": call["completion"]} if call else None,
              attributes={"latency_s": step["latency_s"], "finish_reason": step["finish_reason"],
                          "parse_errors": step["parse_errors"]})
    if step["n_proposed_ops"] or step["rejected_ops"]:
        spans.add(parent, "ISU", SpanType.MEMORY, end, end,
                  inputs={"proposed_ops": _json(step["proposed_ops_json"])},
                  outputs={"accepted_ops": _json(step["accepted_ops_json"]), "rejected_ops": step["rejected_ops"]})
    if step["focus_requested"] or step["disclosed"]:
        spans.add(parent, "PSA", SpanType.RETRIEVER, end, end, inputs={"state_focus": step["focus_requested"]},
                  outputs={"accepted": step["focus_accepted"], "rejected": step["focus_rejected"],
                           "disclosed": step["disclosed"], "disclosed_from": step["disclosed_from"]})
    for tool_call in step["tool_calls"]:
        result = tools.get(tool_call["id"], {})
        spans.add(parent, tool_call["name"], SpanType.TOOL, end, end, inputs=_json(tool_call["arguments_json"]),
                  outputs={"result": result.get("content")}, attributes={"error": bool(result.get("error"))})
    spans.client.end_span(spans.trace_id, parent, outputs={"assistant_message": step["assistant_message"]},
                          end_time_ns=end)
    return end


def log_episode_trace(client: MlflowClient, episode: Row, rows: dict[str, list[Row]], *, experiment_id: str,
                      run_id: str, tags: dict[str, str]) -> str:
    """One finished episode as a trace attached to ``run_id``; returns the trace id."""
    start = _ns(episode["started_at"])
    root = client.start_trace(
        f"{episode['cell']} · task {episode['task_id']} · trial {episode['trial']}", span_type=SpanType.AGENT,
        inputs={k: episode[k] for k in ("task_id", "trial", "method", "model")},
        tags={**tags, EPISODE_TAG: episode["episode_id"], CELL_TAG: episode["cell_id"]},
        experiment_id=experiment_id, run_id=run_id, start_time_ns=start)
    spans = _Spans(client, root.trace_id)
    calls = {(m["request"], m["step"]): m for m in rows.get("messages", [])}
    tools = {t["tool_call_id"]: t for t in rows.get("tools", []) if t["tool_call_id"]}
    t = start
    for step in rows.get("steps", []):
        t = _step(spans, root.span_id, step, calls.get((step["request"], step["step"])), tools, t)
    client.end_trace(root.trace_id, end_time_ns=max(t, _ns(episode["finished_at"])),
                     outputs={k: episode[k] for k in ("status", "termination", "reward", "grading_basis")})
    return root.trace_id
