"""Episode outcomes as rows of the four tables (see :mod:`pipeline.store.schema`)."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

from flowstate import StepRecord
from pipeline.benchmarks.taubench import RewardInfo, is_success
from pipeline.episodes import EpisodeOutcome
from pipeline.store.schema import SCHEMA_VERSION
from pipeline.sweep import EpisodeSpec

Rows = dict[str, list[dict[str, Any]]]


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def id_columns(spec: EpisodeSpec) -> dict[str, Any]:
    cell = spec.cell
    return {
        "schema_version": SCHEMA_VERSION, "sweep_id": spec.sweep_id, "cell_id": cell.cell_id, "cell": cell.label,
        "episode_id": spec.episode_id, "task_id": spec.task_id, "trial": spec.trial,
        "benchmark": cell.benchmark.benchmark, "domain": cell.domain, "method": cell.method.display,
        "model": cell.agent.name,
    }


def step_row(ids: dict[str, Any], s: StepRecord) -> dict[str, Any]:
    rejection = ("operation", "state_id", "reason", "detail")
    return {
        **ids,
        "request": s.request, "step": s.step, "query": s.query,
        "n_proposed_ops": len(s.proposed_ops), "proposed_ops_json": _json(s.proposed_ops),
        "accepted_ops": [{"operation": op.operation, "state_id": op.state_id} for op in s.accepted_ops],
        "accepted_ops_json": _json([op.model_dump(mode="json") for op in s.accepted_ops]),
        "rejected_ops": [r.model_dump(mode="json", include=set(rejection)) for r in s.rejected_ops],
        "focus_requested": s.focus_requested, "focus_accepted": s.focus_accepted,
        "focus_rejected": [r.model_dump(mode="json", include=set(rejection)) for r in s.focus_rejected],
        "disclosed": s.disclosed, "disclosed_from": s.disclosed_from,
        "tool_calls": [{"id": c.id, "name": c.name, "arguments_json": _json(c.arguments)} for c in s.tool_calls],
        "n_tool_calls": len(s.tool_calls), "tool_errors": s.tool_errors,
        "observation_id": s.observation_id, "observation_chars": s.observation_chars,
        "assistant_message": s.assistant_message,
        "parse_errors": s.parse_errors, "n_parse_errors": len(s.parse_errors), "protocol_warnings": s.protocol_warnings,
        "prompt_tokens": s.prompt_tokens, "completion_tokens": s.completion_tokens,
        "cached_tokens": s.cached_tokens, "cached_tokens_estimate": s.cached_tokens_estimate,
        "latency_s": s.latency_s, "finish_reason": s.finish_reason, "prompt_chars": s.prompt_chars,
        "active_nodes": s.active_nodes, "active_state_tokens": s.active_state_tokens, "index_states": s.index_states,
    }


def _sum(values: list[int | None]) -> int | None:
    """Sum of reported counts; None when nothing was reported (never a misleading 0)."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def outcome_rows(outcome: EpisodeOutcome, *, attempts: int, code_version: str) -> Rows:
    spec, result, reward = outcome.spec, outcome.result, outcome.reward
    ids = id_columns(spec)
    steps = [step_row(ids, s) for s in result.steps]
    transcript = [
        {**ids, "seq": i, "request": m.request, "role": m.role, "content": m.content,
         "tool_calls_json": _json([c.model_dump(mode="json") for c in m.tool_calls]) if m.tool_calls else None,
         "tool_call_id": m.tool_call_id, "error": m.error}
        for i, m in enumerate(outcome.transcript)
    ]
    by_step = {(s.request, s.step): s for s in result.steps}
    # Rows in call order: the user simulator's i-th call writes the message that opens request i+1
    # (its last one may end the conversation), the agent's calls of that request follow, the judge
    # grades after the conversation.
    order: list[tuple[float, int, int]] = []
    messages = []
    for ex in result.exchanges:
        order.append((ex.request, 1, ex.step))
        s = by_step[(ex.request, ex.step)]
        messages.append({**ids, "caller": "agent", "request": ex.request, "step": ex.step,
                         "prompt_json": _json([m.model_dump() for m in ex.messages]), "completion": ex.completion,
                         "prompt_tokens": s.prompt_tokens, "completion_tokens": s.completion_tokens,
                         "cached_tokens": s.cached_tokens, "cached_tokens_estimate": s.cached_tokens_estimate,
                         "latency_s": s.latency_s, "served_model": s.served_model, "served_by": s.served_by})
    user_calls = 0
    for i, call in enumerate(outcome.calls):
        if call.caller == "user_simulator":
            user_calls += 1
            order.append((user_calls, 0, i))
        else:
            order.append((math.inf, 2, i))
        u = call.completion.usage
        messages.append({**ids, "caller": call.caller, "request": None, "step": None,
                         "prompt_json": _json([m.model_dump() for m in call.messages]), "completion": call.completion.text,
                         "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                         "cached_tokens": u.cached_tokens, "cached_tokens_estimate": u.cached_tokens_estimate,
                         "latency_s": call.completion.latency_s, "served_model": call.completion.model,
                         "served_by": call.completion.served_by})
    messages = [row for _, row in sorted(zip(order, messages, strict=True), key=lambda pair: pair[0])]
    for seq, row in enumerate(messages):
        row["seq"] = seq

    def caller_tokens(caller: str, field: str) -> int | None:
        return _sum([c.completion.usage.model_dump()[field] for c in outcome.calls if c.caller == caller])

    episode = {
        **ids,
        "seed": spec.seed,
        "status": "completed" if reward is not None else "grading_failed",
        "error": outcome.grading_error, "attempts": attempts,
        "termination": result.termination,
        **reward_columns(reward, spec.cell.benchmark.reward_basis),
        "n_requests": result.requests, "n_steps": len(result.steps),
        "n_parse_error_steps": sum(1 for s in result.steps if s.parse_errors),
        "n_tool_errors": sum(s.tool_errors for s in result.steps),
        "n_disclosed": sum(len(s.disclosed) for s in result.steps),
        "repository_nodes": len(result.repository.nodes) if result.repository else None,
        "agent_prompt_tokens": _sum([s.prompt_tokens for s in result.steps]),
        "agent_completion_tokens": _sum([s.completion_tokens for s in result.steps]),
        "agent_cached_tokens": _sum([s.cached_tokens for s in result.steps]),
        "agent_cached_tokens_estimate": _sum([s.cached_tokens_estimate for s in result.steps]),
        "user_prompt_tokens": caller_tokens("user_simulator", "prompt_tokens"),
        "user_completion_tokens": caller_tokens("user_simulator", "completion_tokens"),
        "judge_prompt_tokens": caller_tokens("judge", "prompt_tokens"),
        "judge_completion_tokens": caller_tokens("judge", "completion_tokens"),
        "protocol": spec.cell.method.protocol.value, "tool_rendering": spec.cell.benchmark.tool_rendering,
        "started_at": outcome.started_at, "finished_at": outcome.finished_at, "duration_s": outcome.duration_s,
        "code_version": code_version,
        "repository_json": result.repository.model_dump_json() if result.repository else None,
    }
    return {"steps": steps, "transcript": transcript, "messages": messages, "episodes": [episode]}


def reward_columns(reward: RewardInfo | None, basis: str) -> dict[str, Any]:
    """The episodes columns grading decides (all null when it could not grade)."""
    components = reward.components if reward else {}
    return {
        "reward": reward.reward if reward else None,
        "success": is_success(reward.reward) if reward else None,
        # Always explicit, e.g. "task: DB×NL_ASSERTION" or "classic: DB×COMMUNICATE".
        "reward_basis": f"{reward.basis}: {'×'.join(reward.reward_basis)}" if reward else basis,
        "graded": reward.graded if reward else False,
        "db": components.get("DB"), "communicate": components.get("COMMUNICATE"),
        "nl_assertion": components.get("NL_ASSERTION"), "action": components.get("ACTION"),
        "action_read_accuracy": reward.read_accuracy if reward else None,
        "action_write_accuracy": reward.write_accuracy if reward else None,
        "reward_info_json": reward.model_dump_json() if reward else None,
    }


def failure_rows(spec: EpisodeSpec, *, error: str, attempts: int, code_version: str) -> Rows:
    """An infrastructure failure: one episodes row with the error, excluded from every metric."""
    now = datetime.now(UTC)
    row = {name: None for name in (
        "termination", "reward", "success", "db", "communicate", "nl_assertion", "action", "action_read_accuracy",
        "action_write_accuracy", "n_requests", "n_steps", "n_parse_error_steps", "n_tool_errors", "n_disclosed",
        "repository_nodes", "agent_prompt_tokens", "agent_completion_tokens", "agent_cached_tokens",
        "agent_cached_tokens_estimate", "user_prompt_tokens", "user_completion_tokens", "judge_prompt_tokens",
        "judge_completion_tokens", "started_at", "duration_s", "reward_info_json", "repository_json")}
    row.update({
        **id_columns(spec), "seed": spec.seed, "status": "failed", "error": error, "attempts": attempts,
        "termination": "infrastructure_error", "reward_basis": spec.cell.benchmark.reward_basis, "graded": False,
        "protocol": spec.cell.method.protocol.value, "tool_rendering": spec.cell.benchmark.tool_rendering,
        "finished_at": now, "code_version": code_version,
    })
    return {"episodes": [row]}
