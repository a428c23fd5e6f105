"""Explicit pyarrow schemas of the four trajectory tables, with a schema version column.

steps       one row per agent model call (FlowState step): ISU, PSA, tools, tokens, sizes
episodes    one row per finished or failed episode: reward and components, termination, totals
transcript  every conversation event in order (what grading and re-grading read)
messages    every model call of any caller (agent, user simulator, judge): full prompt and completion

New columns may be added in later versions; readers use ``union_by_name``.
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 1
TABLES = ("steps", "episodes", "transcript", "messages")

_str = pa.string()
_i32 = pa.int32()
_i64 = pa.int64()
_f64 = pa.float64()

ID_FIELDS = [
    pa.field("schema_version", pa.int16(), nullable=False),
    pa.field("sweep_id", _str, nullable=False),
    pa.field("cell_id", _str, nullable=False),
    pa.field("cell", _str, nullable=False),
    pa.field("episode_id", _str, nullable=False),
    pa.field("task_id", _str, nullable=False),
    pa.field("trial", _i32, nullable=False),
    pa.field("benchmark", _str, nullable=False),
    pa.field("domain", _str, nullable=False),
    pa.field("method", _str, nullable=False),
    pa.field("model", _str, nullable=False),
]

_rejection = pa.struct([("operation", _str), ("state_id", _str), ("reason", _str), ("detail", _str)])

STEPS = pa.schema(ID_FIELDS + [
    pa.field("request", _i32), pa.field("step", _i32), pa.field("query", _str),
    pa.field("n_proposed_ops", _i32), pa.field("proposed_ops_json", _str),
    pa.field("accepted_ops", pa.list_(pa.struct([("operation", _str), ("state_id", _str)]))),
    pa.field("accepted_ops_json", _str),
    pa.field("rejected_ops", pa.list_(_rejection)),
    pa.field("focus_requested", pa.list_(_str)), pa.field("focus_accepted", pa.list_(_str)),
    pa.field("focus_rejected", pa.list_(_rejection)),
    pa.field("disclosed", pa.list_(_str)), pa.field("disclosed_from", pa.list_(_i32)),
    pa.field("tool_calls", pa.list_(pa.struct([("id", _str), ("name", _str), ("arguments_json", _str)]))),
    pa.field("n_tool_calls", _i32), pa.field("tool_errors", _i32),
    pa.field("observation_id", _str), pa.field("observation_chars", _i64),
    pa.field("assistant_message", _str),
    pa.field("parse_errors", pa.list_(_str)), pa.field("n_parse_errors", _i32),
    pa.field("protocol_warnings", pa.list_(_str)),
    pa.field("prompt_tokens", _i64), pa.field("completion_tokens", _i64),
    pa.field("cached_tokens", _i64), pa.field("cached_tokens_estimate", _i64),
    pa.field("latency_s", _f64), pa.field("finish_reason", _str), pa.field("prompt_chars", _i64),
    pa.field("active_nodes", _i32), pa.field("active_state_tokens", _i64), pa.field("index_states", _i32),
])

EPISODES = pa.schema(ID_FIELDS + [
    pa.field("seed", _i64), pa.field("status", _str), pa.field("error", _str), pa.field("attempts", _i32),
    pa.field("termination", _str), pa.field("reward", _f64), pa.field("success", pa.bool_()),
    pa.field("reward_basis", _str), pa.field("graded", pa.bool_()),
    pa.field("db", _f64), pa.field("communicate", _f64), pa.field("nl_assertion", _f64),
    pa.field("action", _f64), pa.field("action_read_accuracy", _f64), pa.field("action_write_accuracy", _f64),
    pa.field("n_requests", _i32), pa.field("n_steps", _i32), pa.field("n_parse_error_steps", _i32),
    pa.field("n_tool_errors", _i32), pa.field("n_disclosed", _i32), pa.field("repository_nodes", _i32),
    pa.field("agent_prompt_tokens", _i64), pa.field("agent_completion_tokens", _i64),
    pa.field("agent_cached_tokens", _i64), pa.field("agent_cached_tokens_estimate", _i64),
    pa.field("user_prompt_tokens", _i64), pa.field("user_completion_tokens", _i64),
    pa.field("judge_prompt_tokens", _i64), pa.field("judge_completion_tokens", _i64),
    pa.field("protocol", _str), pa.field("tool_rendering", _str),
    pa.field("started_at", pa.timestamp("us", tz="UTC")), pa.field("finished_at", pa.timestamp("us", tz="UTC")),
    pa.field("duration_s", _f64), pa.field("code_version", _str),
    pa.field("reward_info_json", _str), pa.field("repository_json", _str),
])

TRANSCRIPT = pa.schema(ID_FIELDS + [
    pa.field("seq", _i32), pa.field("request", _i32), pa.field("role", _str), pa.field("content", _str),
    pa.field("tool_calls_json", _str), pa.field("tool_call_id", _str), pa.field("error", pa.bool_()),
])

MESSAGES = pa.schema(ID_FIELDS + [
    pa.field("seq", _i32), pa.field("caller", _str), pa.field("request", _i32), pa.field("step", _i32),
    pa.field("prompt_json", _str), pa.field("completion", _str),
    pa.field("prompt_tokens", _i64), pa.field("completion_tokens", _i64),
    pa.field("cached_tokens", _i64), pa.field("cached_tokens_estimate", _i64),
    pa.field("latency_s", _f64), pa.field("served_model", _str), pa.field("served_by", _str),
])

SCHEMAS: dict[str, pa.Schema] = {"steps": STEPS, "episodes": EPISODES, "transcript": TRANSCRIPT, "messages": MESSAGES}
