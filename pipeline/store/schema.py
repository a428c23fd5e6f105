"""Explicit pyarrow schemas of the trajectory tables, with a schema version column.

steps             one row per agent model call (a FlowState step): ISU, PSA, tools, tokens, sizes
episodes          one row per finished or failed episode: reward, the benchmark's metrics, termination, totals
transcript        every conversation event in order (what grading and re-grading read)
messages          every model call of any role (agent, memory, user simulator, judge, tool model,
                  embeddings): full prompt and completion
request_outcomes  one row per graded request, for benchmarks that grade each request (depth analysis)
method_records    what a method declared worth keeping (kind, request, step, JSON payload)
faults            one row per fault of a model call of any role (each failed attempt, retried or not,
                  and each completion cut at max_tokens), of every attempt of the episode

No column names a benchmark or a method: a benchmark's scores are the ``metrics`` map of the
episodes table, declared by the benchmark (see ``sql/scores.sql``). New columns may be added in later
versions; readers use ``union_by_name``.

Version 2 (this one) replaced version 1's τ-bench columns (db, communicate, nl_assertion, action,
action_read_accuracy, action_write_accuracy, reward_basis, reward_info_json, tool_rendering,
user_* tokens) by ``metrics``, ``grading_basis``, ``grading_json``, the cell's options as JSON and
per-role token columns. The faults table came later, without a version change (no row of another
table changed); a sweep written before it has no faults folder, which readers see as an empty table.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from importlib.abc import MetaPathFinder
from typing import Any

import pyarrow as pa

from pipeline.core.roles import ROLES

SCHEMA_VERSION = 2

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
    # True where a tokenizer counted the tokens because no server did (a scripted fixture's calls).
    pa.field("tokens_counted", pa.bool_()),
    # From the engine's token ids: the prompt's leading tokens the conversation's previous call left on
    # this replica, and the prompt minus the content added since that call (pipeline/llm/prefix.py).
    pa.field("reusable_prefix_tokens", _i64), pa.field("physical_limit_tokens", _i64),
    pa.field("active_nodes", _i32), pa.field("active_state_tokens", _i64), pa.field("index_states", _i32),
    # The method's own model calls during this step (a request's opening and closing calls count
    # on its first and last step): part of #Tok.
    pa.field("memory_calls", _i32), pa.field("memory_prompt_tokens", _i64), pa.field("memory_completion_tokens", _i64),
])

#: Per-role token columns of the episodes table (embeddings count only input tokens).
ROLE_TOKEN_FIELDS = [
    pa.field(f"{role}_{kind}_tokens", _i64)
    for role in ROLES if role != "embeddings" for kind in ("prompt", "completion")
] + [pa.field("embeddings_tokens", _i64)]

EPISODES = pa.schema(ID_FIELDS + [
    pa.field("seed", _i64), pa.field("status", _str), pa.field("error", _str), pa.field("attempts", _i32),
    pa.field("termination", _str),
    # What grading decided: the reward, success, whether the grading gate passed, the basis, and the
    # benchmark's declared metrics by name.
    pa.field("reward", _f64), pa.field("success", pa.bool_()), pa.field("graded", pa.bool_()),
    pa.field("grading_basis", _str), pa.field("metrics", pa.map_(_str, _f64)),
    pa.field("n_requests", _i32), pa.field("n_steps", _i32), pa.field("n_parse_error_steps", _i32),
    pa.field("n_tool_errors", _i32), pa.field("n_disclosed", _i32), pa.field("repository_nodes", _i32),
    # #Tok, the paper's measure: the agent's and the method's own model calls, prompt + completion.
    pa.field("tokens", _i64),
    *ROLE_TOKEN_FIELDS[:2],
    pa.field("agent_cached_tokens", _i64), pa.field("agent_cached_tokens_estimate", _i64),
    *ROLE_TOKEN_FIELDS[2:],
    pa.field("tokens_counted", pa.bool_()),  # #Tok counted by a tokenizer (model-free episodes), not served
    pa.field("agent_reusable_prefix_tokens", _i64), pa.field("agent_physical_limit_tokens", _i64),
    pa.field("protocol", _str),
    pa.field("benchmark_options_json", _str), pa.field("method_options_json", _str),
    pa.field("started_at", pa.timestamp("us", tz="UTC")), pa.field("finished_at", pa.timestamp("us", tz="UTC")),
    pa.field("duration_s", _f64), pa.field("code_version", _str),
    pa.field("grading_json", _str), pa.field("repository_json", _str),
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
    pa.field("tokens_counted", pa.bool_()),
    pa.field("reusable_prefix_tokens", _i64), pa.field("physical_limit_tokens", _i64),
])

REQUEST_OUTCOMES = pa.schema(ID_FIELDS + [
    pa.field("request", _i32),
    pa.field("correct", pa.bool_()),
    pa.field("score", _f64),
    pa.field("credit_passed", _i32),
    pa.field("credit_total", _i32),
    pa.field("reason", _str),
])

METHOD_RECORDS = pa.schema(ID_FIELDS + [
    pa.field("seq", _i32), pa.field("kind", _str), pa.field("request", _i32), pa.field("step", _i32),
    pa.field("payload_json", _str),
])

# Kinds and their meaning: pipeline/llm/faults.py. ``seq`` orders an episode's faults over its attempts;
# ``episode_attempt`` is the driver's attempt, ``attempt`` the client's attempt within one call;
# ``caller``, ``request`` and ``step`` as in messages; ``deployment`` the job's name of the deployment.
FAULTS = pa.schema(ID_FIELDS + [
    pa.field("seq", _i32), pa.field("episode_attempt", _i32), pa.field("caller", _str),
    pa.field("request", _i32), pa.field("step", _i32), pa.field("deployment", _str), pa.field("served_by", _str),
    pa.field("kind", _str), pa.field("http_status", _i32), pa.field("attempt", _i32), pa.field("retried", pa.bool_()),
    pa.field("latency_s", _f64), pa.field("message", _str),
])

SCHEMAS: dict[str, pa.Schema] = {
    "steps": STEPS, "episodes": EPISODES, "transcript": TRANSCRIPT, "messages": MESSAGES,
    "request_outcomes": REQUEST_OUTCOMES, "method_records": METHOD_RECORDS, "faults": FAULTS,
}
TABLES: tuple[str, ...] = tuple(SCHEMAS)


def rows_table(rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    """``rows`` (dicts keyed by column; missing keys are null, others ignored) as a table of ``schema``.

    The same table as ``pa.Table.from_pylist``, converted as one struct array: one conversion of the
    rows instead of one per column, about three times cheaper for an episode's few rows (they are
    written once per episode, on the actor's event loop)."""
    batch = pa.RecordBatch.from_struct_array(pa.array(rows, type=pa.struct(list(schema))))
    return pa.Table.from_batches([batch]).replace_schema_metadata(schema.metadata)


class _PandasHidden(MetaPathFinder):
    """Makes ``import pandas`` fail while it is on ``sys.meta_path``."""

    @staticmethod
    def find_spec(name: str, *args: Any) -> None:
        if name == "pandas":
            raise ImportError("pandas is hidden while pyarrow probes for it")


def convert_rows_without_pandas() -> None:
    """Spare this process the import of pandas (half a CPU second per episode actor).

    pyarrow's first conversion of a Python list imports pandas only to ask whether the list is a
    pandas object; rows never are. Hiding pandas from that one probe makes pyarrow treat lists as
    plain sequences from then on. pandas itself stays importable: ``to_pandas()`` or a plug-in's
    ``import pandas`` still work, because pyarrow imports it again when asked for pandas itself."""
    if "pandas" in sys.modules:
        return
    sys.meta_path.insert(0, _PandasHidden)
    try:
        pa.array([], type=pa.null())
    finally:
        sys.meta_path.remove(_PandasHidden)


# The tables an infrastructure failure writes: a resume reads a failure's status only from files of
# episodes with no row in another table (pipeline.store.reader.finished_episodes).
FAILURE_TABLES = frozenset({"episodes", "faults"})
