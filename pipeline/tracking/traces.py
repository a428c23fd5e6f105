"""Recorded episodes as MLflow traces: one span per agent step, with its model call, ISU, PSA and
tool calls as child spans, timed from the recorded latencies (no live model involved).

A trace is built whole, as MLflow stores it (its span JSON; the trace's name and tags as the root
span's ``mlflow.traceTag.*`` attributes, which the store turns into the trace's), and the traces of
a sweep are written together: all their spans in a few ``log_spans`` batches (the store makes each
trace from its spans), then one link to its cell's run per 100 traces. MLflow's live tracing API
would export every span on its own from background threads: tens of thousands of writes for a
sweep, which a sqlite store answered with "database is locked" and a full export queue that
dropped traces. Ids derive from the episode and its cell's run, so writing a trace again overwrites
it rather than adding a second one (the same episode of another sweep or experiment has another run).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import duckdb
from mlflow import MlflowClient
from mlflow.entities import Span, SpanStatusCode, SpanType
from mlflow.tracing.client import TracingClient
from mlflow.tracing.constant import SpanAttributeKey, TraceTagKey

Row = dict[str, Any]
EPISODE_TAG = "flowstate.episode_id"
CELL_TAG = "flowstate.cell_id"
_NS = 1_000_000_000
_SPANS_PER_WRITE = 2000
_LINKS_PER_CALL = 100  # MLflow's limit


def _ns(t: datetime) -> int:
    return int(t.timestamp() * _NS)


def _json(text: str | None) -> Any:
    try:
        return json.loads(text) if text else None
    except json.JSONDecodeError:
        return text


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


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


@dataclass
class EpisodeTrace:
    """One episode's trace as MLflow stores it: its spans, and the run it belongs to."""

    trace_id: str
    run_id: str
    spans: list[Span] = field(default_factory=list)


class _Spans:
    """Spans of one trace in MLflow's span JSON (attribute values JSON-encoded, ids base64), with
    ids derived from the episode id."""

    def __init__(self, run_id: str, episode_id: str) -> None:
        self._seed = hashlib.sha256(f"flowstate-trace:{run_id}:{episode_id}".encode()).hexdigest()
        self.otel_trace_id = int(self._seed[:32], 16)
        self.trace_id = f"tr-{self._seed[:32]}"
        self.spans: list[Span] = []
        self._ids = 0

    def new_id(self) -> int:
        self._ids += 1
        return int(hashlib.sha256(f"{self._seed}:{self._ids}".encode()).hexdigest()[:16], 16) or 1

    def add(self, parent: int | None, name: str, span_type: str, start: int, end: int, *, inputs: Any = None,
            outputs: Any = None, attributes: dict[str, Any] | None = None, span_id: int | None = None) -> int:
        span_id = span_id or self.new_id()
        values: dict[str, Any] = {SpanAttributeKey.REQUEST_ID: self.trace_id, SpanAttributeKey.SPAN_TYPE: span_type,
                                  **(attributes or {})}
        if inputs is not None:
            values[SpanAttributeKey.INPUTS] = inputs
        if outputs is not None:
            values[SpanAttributeKey.OUTPUTS] = outputs
        self.spans.append(Span.from_dict({
            "trace_id": _b64(self.otel_trace_id, 16), "span_id": _b64(span_id, 8),
            "parent_span_id": _b64(parent, 8) if parent is not None else None, "name": name,
            "start_time_unix_nano": start, "end_time_unix_nano": end, "events": [], "links": [],
            "status": {"code": SpanStatusCode.OK.to_otel_proto_status_code_name(), "message": ""},
            "attributes": {k: _dump(v) for k, v in values.items()},
        }))
        return span_id


def _b64(value: int, size: int) -> str:
    return base64.b64encode(value.to_bytes(size, "big")).decode()


def _step(spans: _Spans, root: int, step: Row, call: Row | None, tools: dict[str, Row], start: int) -> int:
    """The spans of one agent step; returns when it ended."""
    end = start + max(1, int((step["latency_s"] or 0) * _NS))
    attributes = {k: step[k] for k in ("request", "step", "active_nodes", "active_state_tokens", "index_states",
                                       "prompt_tokens", "completion_tokens", "cached_tokens", "n_parse_errors")}
    parent = spans.add(root, f"request {step['request']} · step {step['step']}", SpanType.CHAIN, start, end,
                       inputs={"query": step["query"]} if step["query"] else None,
                       outputs={"assistant_message": step["assistant_message"]}, attributes=attributes)
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
    return end


def episode_trace(episode: Row, rows: dict[str, list[Row]], *, run_id: str, tags: dict[str, str]) -> EpisodeTrace:
    """One finished episode as a trace attached to ``run_id`` (written by :func:`write_traces`)."""
    spans = _Spans(run_id, episode["episode_id"])
    name = f"{episode['cell']} · task {episode['task_id']} · trial {episode['trial']}"
    inputs = {k: episode[k] for k in ("task_id", "trial", "method", "model")}
    outputs = {k: episode[k] for k in ("status", "termination", "reward", "grading_basis")}
    start = _ns(episode["started_at"])
    root = spans.new_id()
    calls = {(m["request"], m["step"]): m for m in rows.get("messages", [])}
    tools = {t["tool_call_id"]: t for t in rows.get("tools", []) if t["tool_call_id"]}
    t = start
    for step in rows.get("steps", []):
        t = _step(spans, root, step, calls.get((step["request"], step["step"])), tools, t)
    end = max(t, _ns(episode["finished_at"]))
    trace_tags = {**tags, EPISODE_TAG: episode["episode_id"], CELL_TAG: episode["cell_id"], TraceTagKey.TRACE_NAME: name}
    spans.add(None, name, SpanType.AGENT, start, end, inputs=inputs, outputs=outputs, span_id=root,
              attributes={SpanAttributeKey.TRACE_TAG_PREFIX + k: v for k, v in trace_tags.items()})
    return EpisodeTrace(trace_id=spans.trace_id, run_id=run_id, spans=spans.spans)


def write_traces(client: MlflowClient, experiment_id: str, traces: Iterable[EpisodeTrace]) -> int:
    """Write whole traces: their spans in batches, then their links to their runs; returns how many."""
    traces = list(traces)
    spans = [span for trace in traces for span in trace.spans]
    tracing = TracingClient(client.tracking_uri)
    for i in range(0, len(spans), _SPANS_PER_WRITE):
        tracing.log_spans(experiment_id, spans[i:i + _SPANS_PER_WRITE])
    by_run: dict[str, list[str]] = defaultdict(list)
    for trace in traces:
        by_run[trace.run_id].append(trace.trace_id)
    for run_id, ids in by_run.items():
        for i in range(0, len(ids), _LINKS_PER_CALL):
            client.link_traces_to_run(ids[i:i + _LINKS_PER_CALL], run_id)
    return len(traces)
