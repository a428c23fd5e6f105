"""Episode outcomes as rows of the tables (see :mod:`pipeline.store.schema`)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from flowstate import StepRecord
from pipeline.benchmarks.base import Grade
from pipeline.core.roles import ROLES, TOK_ROLES
from pipeline.core.specs import EpisodeSpec
from pipeline.run.calls import CallFault, ModelCall
from pipeline.run.episode import EpisodeOutcome
from pipeline.store.schema import EPISODES, SCHEMA_VERSION

Rows = dict[str, list[dict[str, Any]]]


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def id_columns(spec: EpisodeSpec) -> dict[str, Any]:
    cell = spec.cell
    return {
        "schema_version": SCHEMA_VERSION, "sweep_id": spec.sweep_id, "cell_id": cell.cell_id, "cell": cell.label,
        "episode_id": spec.episode_id, "task_id": spec.task_id, "trial": spec.trial,
        "benchmark": cell.benchmark.benchmark, "domain": cell.benchmark.domain, "method": cell.method.display,
        "model": cell.agent.name,
    }


def _sum(values: list[int | None]) -> int | None:
    """Sum of reported counts; None when nothing was reported (never a misleading 0)."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def step_row(ids: dict[str, Any], s: StepRecord, memory: list[ModelCall]) -> dict[str, Any]:
    """The step table's row: the record's JSON (:meth:`StepRecord.as_json`), flattened for Parquet."""
    data = s.as_json()
    proposed, accepted, calls = data.pop("proposed_ops"), data.pop("accepted_ops"), data.pop("tool_calls")
    for unstored in ("served_model", "served_by"):  # in the messages table
        data.pop(unstored)
    return {
        **ids, **data,
        "n_proposed_ops": len(proposed), "proposed_ops_json": _json(proposed),
        "accepted_ops": [{"operation": op["operation"], "state_id": op["state_id"]} for op in accepted],
        "accepted_ops_json": _json(accepted),
        "tool_calls": [{"id": c["id"], "name": c["name"], "arguments_json": _json(c["arguments"])} for c in calls],
        "n_tool_calls": len(calls), "n_parse_errors": len(data["parse_errors"]),
        "memory_calls": len(memory),
        "memory_prompt_tokens": _sum([c.usage.prompt_tokens for c in memory]),
        "memory_completion_tokens": _sum([c.usage.completion_tokens for c in memory]),
    }


def _memory_by_step(steps: list[StepRecord], calls: list[ModelCall]) -> dict[tuple[int, int], list[ModelCall]]:
    """The method's own calls per step: a call before a request's first step counts on it, one after
    its last (at the end of the request) on the last."""
    last_step: dict[int, int] = {}
    for s in steps:
        last_step[s.request] = max(last_step.get(s.request, 0), s.step)
    by_step: dict[tuple[int, int], list[ModelCall]] = defaultdict(list)
    for call in calls:
        if call.caller == "memory" and call.request in last_step:
            by_step[(call.request, min(max(call.step or 1, 1), last_step[call.request]))].append(call)
    return by_step


def message_row(ids: dict[str, Any], call: ModelCall) -> dict[str, Any]:
    u = call.usage
    return {**ids, "seq": call.seq, "caller": call.caller, "request": call.request, "step": call.step,
            "prompt_json": _json(call.prompt), "completion": call.completion,
            "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
            "cached_tokens": u.cached_tokens, "cached_tokens_estimate": u.cached_tokens_estimate,
            "latency_s": call.latency_s, "served_model": call.served_model, "served_by": call.served_by,
            "tokens_counted": u.counted, "reusable_prefix_tokens": u.reusable_prefix_tokens,
            "physical_limit_tokens": u.physical_limit_tokens}


def fault_rows(ids: dict[str, Any], faults: Sequence[CallFault]) -> list[dict[str, Any]]:
    """The faults table's rows of an episode, numbered over all its attempts."""
    return [{**ids, "seq": i, **f.model_dump()} for i, f in enumerate(faults)]


def role_tokens(calls: list[ModelCall]) -> dict[str, int | None]:
    """``<role>_prompt_tokens`` / ``<role>_completion_tokens`` per role (embeddings: input tokens)."""
    columns: dict[str, int | None] = {}
    for role in ROLES:
        mine = [c.usage for c in calls if c.caller == role]
        if role == "embeddings":
            columns["embeddings_tokens"] = _sum([u.prompt_tokens for u in mine])
        else:
            columns[f"{role}_prompt_tokens"] = _sum([u.prompt_tokens for u in mine])
            columns[f"{role}_completion_tokens"] = _sum([u.completion_tokens for u in mine])
    return columns


def tok(columns: dict[str, Any]) -> int | None:
    """#Tok, defined once: prompt + completion tokens of the agent and of the method's own model."""
    return _sum([columns[f"{role}_{kind}_tokens"] for role in TOK_ROLES for kind in ("prompt", "completion")])


def grade_columns(grade: Grade | None) -> dict[str, Any]:
    """The episodes columns grading decides (all null when it could not grade)."""
    return {
        "reward": grade.reward if grade else None,
        "success": grade.success if grade else None,
        "graded": grade.graded if grade else False,
        "grading_basis": grade.basis if grade else None,
        "metrics": grade.metrics if grade else None,
        "grading_json": grade.detail_json if grade else None,
    }


def request_outcome_rows(ids: dict[str, Any], grade: Grade | None) -> list[dict[str, Any]]:
    return [{**ids, **r.model_dump()} for r in grade.requests] if grade else []


def outcome_rows(outcome: EpisodeOutcome, *, attempts: int, code_version: str,
                 earlier_faults: Sequence[CallFault] = ()) -> Rows:
    """Every table's rows of a finished episode; ``earlier_faults``: those of its failed attempts."""
    spec, result, grade = outcome.spec, outcome.result, outcome.grade
    ids = id_columns(spec)
    memory = _memory_by_step(result.steps, outcome.calls)
    steps = [step_row(ids, s, memory.get((s.request, s.step), [])) for s in result.steps]
    transcript = [
        {**ids, "seq": i, "request": m.request, "role": m.role, "content": m.content,
         "tool_calls_json": _json([c.model_dump(mode="json") for c in m.tool_calls]) if m.tool_calls else None,
         "tool_call_id": m.tool_call_id, "error": m.error}
        for i, m in enumerate(outcome.transcript)
    ]
    tokens = role_tokens(outcome.calls)
    episode = {
        **_cell_columns(spec),
        "status": "completed" if grade is not None else "grading_failed",
        "error": outcome.grading_error, "attempts": attempts,
        "termination": result.termination,
        **grade_columns(grade),
        "n_requests": result.requests, "n_steps": len(result.steps),
        "n_parse_error_steps": sum(1 for s in result.steps if s.parse_errors),
        "n_tool_errors": sum(s.tool_errors for s in result.steps),
        "n_disclosed": sum(len(s.disclosed) for s in result.steps),
        "repository_nodes": len(result.repository.nodes) if result.repository else None,
        **tokens,
        "tokens": tok(tokens),
        "agent_cached_tokens": _sum([s.cached_tokens for s in result.steps]),
        "agent_cached_tokens_estimate": _sum([s.cached_tokens_estimate for s in result.steps]),
        "tokens_counted": any(c.usage.counted for c in outcome.calls),
        "agent_reusable_prefix_tokens": _sum([s.reusable_prefix_tokens for s in result.steps]),
        "agent_physical_limit_tokens": _sum([s.physical_limit_tokens for s in result.steps]),
        "started_at": outcome.started_at, "finished_at": outcome.finished_at, "duration_s": outcome.duration_s,
        "code_version": code_version,
        "repository_json": result.repository.model_dump_json() if result.repository else None,
    }
    records = [{**ids, "seq": i, "kind": r.kind, "request": r.request, "step": r.step, "payload_json": _json(r.payload)}
               for i, r in enumerate(result.records)]
    return {"steps": steps, "transcript": transcript, "messages": [message_row(ids, c) for c in outcome.calls],
            "request_outcomes": request_outcome_rows(ids, grade), "method_records": records,
            "faults": fault_rows(ids, [*earlier_faults, *outcome.faults]), "episodes": [_episode_row(episode)]}


def _cell_columns(spec: EpisodeSpec) -> dict[str, Any]:
    cell = spec.cell
    return {**id_columns(spec), "seed": spec.seed, "protocol": cell.method.protocol.value,
            "benchmark_options_json": _json(cell.benchmark.identity()),
            "method_options_json": _json(cell.method.identity())}


def _episode_row(values: dict[str, Any]) -> dict[str, Any]:
    """A full episodes row: every column of the schema, null where ``values`` has none."""
    unknown = set(values) - set(EPISODES.names)
    if unknown:
        raise ValueError(f"not episodes columns: {sorted(unknown)}")
    return {name: values.get(name) for name in EPISODES.names}


def failure_rows(spec: EpisodeSpec, *, error: str, attempts: int, code_version: str,
                 faults: Sequence[CallFault] = ()) -> Rows:
    """An infrastructure failure: one episodes row with the error, excluded from every metric, and
    the faults of its attempts' calls."""
    return {"faults": fault_rows(id_columns(spec), faults), "episodes": [_episode_row({
        **_cell_columns(spec), "status": "failed", "error": error, "attempts": attempts,
        "termination": "infrastructure_error", "graded": False, "finished_at": datetime.now(UTC),
        "code_version": code_version,
    })]}
