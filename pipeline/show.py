"""``flowstate show EPISODE_ID``: one episode, readably — requests, steps, state, tools, messages, tokens, faults."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.store.reader import runs_table_files, select


class EpisodeNotFound(LookupError):
    pass


def _rows(runs: Path, table: str, tail: str, params: list[Any]) -> list[dict]:
    return select(runs_table_files(runs, table), "*", tail, params)


def load_episode(runs: Path, episode_id: str) -> dict[str, list[dict]]:
    """The episode's rows of every table; ``episode_id`` may be a unique prefix."""
    episodes = _rows(runs, "episodes", "WHERE starts_with(episode_id, ?) ORDER BY episode_id", [episode_id])
    ids = sorted({e["episode_id"] for e in episodes})
    if not ids:
        raise EpisodeNotFound(f"no episode {episode_id!r} under {runs}")
    if len(ids) > 1:
        raise EpisodeNotFound(f"{episode_id!r} matches {len(ids)} episodes: {', '.join(ids[:5])}…; give more characters")
    full = ids[0]
    return {
        "episodes": [e for e in episodes if e["episode_id"] == full],
        "steps": _rows(runs, "steps", "WHERE episode_id = ? ORDER BY request, step", [full]),
        "transcript": _rows(runs, "transcript", "WHERE episode_id = ? ORDER BY seq", [full]),
        "messages": _rows(runs, "messages", "WHERE episode_id = ? ORDER BY seq", [full]),
        "request_outcomes": _rows(runs, "request_outcomes", "WHERE episode_id = ? ORDER BY request", [full]),
        "method_records": _rows(runs, "method_records", "WHERE episode_id = ? ORDER BY seq", [full]),
        "faults": _rows(runs, "faults", "WHERE episode_id = ? ORDER BY seq", [full]),
    }


def _clip(text: Any, limit: int = 160) -> str:
    text = "" if text is None else str(text).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render(data: dict[str, list[dict]]) -> Iterator[str]:
    ep = data["episodes"][0]
    yield f"episode {ep['episode_id']}  sweep {ep['sweep_id']}"
    yield f"  cell {ep['cell']}  task {ep['task_id']}  trial {ep['trial']}  seed {ep['seed']}"
    if ep["status"] == "failed":
        yield f"  FAILED after {ep['attempts']} attempt(s): {ep['error']}"
        yield from _fault_lines(data.get("faults") or [])
        return
    metrics = ", ".join(f"{k} {v:g}" for k, v in sorted((ep["metrics"] or {}).items()))
    yield (f"  status {ep['status']} · termination {ep['termination']} · reward {ep['reward']} ({ep['grading_basis']}"
           f"{'; ' + metrics if metrics else ''})")
    yield (f"  {ep['n_requests']} requests · {ep['n_steps']} steps · {ep['n_parse_error_steps']} steps with parse errors · "
           f"{ep['n_tool_errors']} tool errors · {ep['duration_s']:.2f} s")
    yield (f"  tokens: #Tok {ep['tokens']} = agent {ep['agent_prompt_tokens']} prompt + {ep['agent_completion_tokens']} "
           f"completion (cached {ep['agent_cached_tokens']}, estimated cached {ep['agent_cached_tokens_estimate']})"
           f"{_role_tokens(ep, 'memory')}; beside it:{_role_tokens(ep, 'user_simulator')}{_role_tokens(ep, 'judge')}"
           f"{_role_tokens(ep, 'tool_model')}")
    graded = data.get("request_outcomes") or []
    if graded:
        yield ("  requests graded: " + " ".join(f"{r['request']}{'✓' if r['correct'] else '✗'}" for r in graded)
               + f" ({sum(bool(r['correct']) for r in graded)}/{len(graded)} correct)")
    yield from _fault_lines(data.get("faults") or [])
    records = data.get("method_records") or []
    if records:
        kinds: dict[str, int] = {}
        for r in records:
            kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
        yield "  method records: " + ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
    request = None
    for s in data["steps"]:
        if s["request"] != request:
            request = s["request"]
            yield ""
            yield f"request {request}: {_clip(s['query'])}"
        yield from _step_lines(s)
    yield ""
    yield "conversation:"
    for m in data["transcript"]:
        if m["role"] == "tool":
            yield f"  tool{' (error)' if m['error'] else ''}: {_clip(m['content'])}"
        elif m["tool_calls_json"]:
            calls = json.loads(m["tool_calls_json"])
            yield "  assistant calls: " + "; ".join(f"{c['name']}({_clip(json.dumps(c['arguments']), 80)})" for c in calls)
        else:
            yield f"  {m['role']}: {_clip(m['content'], 400)}"
    if ep.get("repository_json"):
        nodes = json.loads(ep["repository_json"])["nodes"]
        tool = sum(n["origin"] == "tool" for n in nodes)
        yield ""
        yield f"final repository: {len(nodes)} nodes ({len(nodes) - tool} model, {tool} persisted observations)"
        for n in nodes:
            yield f"  [{n['source_request']}] {n['state_id']} ({n['type']}, {n['origin']}): {_clip(n['summary'], 100)}"


def _fault_lines(faults: list[dict]) -> Iterator[str]:
    if not faults:
        return
    kinds: dict[str, int] = {}
    for f in faults:
        kind = f"{f['kind']} {f['http_status']}" if f["http_status"] and f["kind"] != "length" else f["kind"]
        kinds[kind] = kinds.get(kind, 0) + 1
    yield f"  faults: {len(faults)} (" + ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items())) + ")"
    for f in faults:
        where = f" request {f['request']} step {f['step']}" if f["request"] is not None else ""
        outcome = "retried" if f["retried"] else "kept" if f["kind"] == "length" else "raised"
        yield (f"    attempt {f['episode_attempt']}.{f['attempt']} {f['caller']}{where} on {f['deployment']}: "
               f"{f['kind']} after {f['latency_s']:.2f} s, {outcome}: {_clip(f['message'], 120)}")


def _role_tokens(ep: dict, role: str) -> str:
    prompt, completion = ep.get(f"{role}_prompt_tokens"), ep.get(f"{role}_completion_tokens")
    return "" if prompt is None and completion is None else f" {role} {prompt} + {completion}"


def _step_lines(s: dict) -> Iterator[str]:
    yield (f"  step {s['step']}: {s['prompt_tokens']} prompt / {s['completion_tokens']} completion tokens, "
           f"{s['latency_s']:.2f} s, active state {s['active_nodes']} nodes")
    for op in s["accepted_ops"] or []:
        yield f"    + {op['operation']} {op['state_id']}"
    for op in s["rejected_ops"] or []:
        yield f"    ✗ {op['operation']} {op['state_id']}: {op['reason']} — {_clip(op['detail'], 100)}"
    if s["focus_requested"]:
        yield f"    focus {s['focus_requested']} -> disclosed {s['disclosed']}"
    for r in s["focus_rejected"] or []:
        yield f"    ✗ focus {r['state_id']}: {r['reason']}"
    for call in s["tool_calls"] or []:
        yield f"    tool {call['name']}({_clip(call['arguments_json'], 100)})"
    if s["observation_id"]:
        yield f"    -> {s['observation_id']} ({s['observation_chars']} chars, {s['tool_errors']} errors)"
    if s["assistant_message"]:
        yield f"    message: {_clip(s['assistant_message'], 300)}"
    for error in s["parse_errors"] or []:
        yield f"    parse error: {_clip(error, 200)}"
