"""``flowstate show EPISODE_ID``: one episode, readably — requests, steps, state, tools, model calls, tokens, faults.

Every text is cut in the query, with its length beside it, so an episode holding a 10 MB tool result
or completion is shown from a few kilobytes: DuckDB reads the values, Python never holds one whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flowstate.errors import FlowStateError
from pipeline.store.copies import read_set
from pipeline.store.files import NoResultsError, sweep_dirs
from pipeline.store.reader import select

SHORT = 100  # ids, arguments, summaries
LONG = 400  # queries, messages, tool results, completions


class EpisodeNotFound(FlowStateError, LookupError):
    pass


def _cut(column: str, limit: int = LONG) -> str:
    """``column`` cut to ``limit`` characters, and its whole length as ``<column>_chars``."""
    return f"left({column}, {limit}) AS {column}, length({column}) AS {column}_chars"


def _cut_each(column: str, fields: dict[str, int | None] | None = None, limit: int = SHORT) -> str:
    """A list column with each string, or each struct's fields that have a limit, cut to it."""
    if fields is None:
        return f"list_transform({column}, lambda x: left(x, {limit})) AS {column}"
    parts = ", ".join(f"'{name}': " + (f"x.{name}" if cut is None else f"left(x.{name}, {cut})")
                      for name, cut in fields.items())
    return f"list_transform({column}, lambda x: {{{parts}}}) AS {column}"


_REJECTION: dict[str, int | None] = {"operation": None, "state_id": SHORT, "reason": None, "detail": SHORT}
EPISODE = ("* EXCLUDE (error, grading_json, repository_json, benchmark_options_json, method_options_json), "
           + _cut("error", 2000))
STEP = ", ".join([
    "request, step, prompt_tokens, completion_tokens, latency_s, active_nodes, observation_id, observation_chars",
    "tool_errors", _cut("query"), _cut("assistant_message"), _cut_each("parse_errors", limit=2 * SHORT),
    _cut_each("accepted_ops", {"operation": None, "state_id": SHORT}), _cut_each("rejected_ops", _REJECTION),
    _cut_each("focus_requested"), _cut_each("disclosed"), _cut_each("focus_rejected", _REJECTION),
    _cut_each("tool_calls", {"name": SHORT, "arguments_json": SHORT}),
])
TRANSCRIPT = ("role, error, " + _cut("content") + ", list_transform(from_json(tool_calls_json, "
              "'[{\"name\": \"VARCHAR\", \"arguments\": \"JSON\"}]'), lambda x: {'name': left(x.name, 100), "
              f"'arguments': left(x.arguments::VARCHAR, {SHORT})}}) AS tool_calls")
MESSAGE = ("caller, request, step, prompt_tokens, completion_tokens, latency_s, length(prompt_json) AS prompt_chars, "
           + _cut("completion"))
FAULT = "* EXCLUDE (message), " + _cut("message", SHORT)
NODES = ("list_transform(from_json(repository_json, '{\"nodes\": [{\"source_request\": \"INTEGER\", "
         "\"state_id\": \"VARCHAR\", \"type\": \"VARCHAR\", \"origin\": \"VARCHAR\", \"summary\": \"VARCHAR\"}]}').nodes, "
         f"lambda x: {{'source_request': x.source_request, 'state_id': left(x.state_id, {SHORT}), 'type': x.type, "
         f"'origin': x.origin, 'summary': left(x.summary, {SHORT})}}) AS nodes")


def load_episode(runs: Path, episode_id: str) -> dict[str, list[dict]]:
    """What ``render`` shows of the episode, every text cut; ``episode_id`` may be a unique prefix.
    An episode with several copies under ``runs`` is shown from the one every reader reads
    (:mod:`pipeline.store.copies`)."""
    try:
        read = read_set(sweep_dirs(runs))
    except NoResultsError:
        raise EpisodeNotFound(f"no episode {episode_id!r} under {runs}") from None
    ids = [r["episode_id"] for r in select(read.files["episodes"], "DISTINCT episode_id",
                                           "WHERE starts_with(episode_id, ?) ORDER BY episode_id", [episode_id])]
    if not ids:
        raise EpisodeNotFound(f"no episode {episode_id!r} under {runs}")
    if len(ids) > 1:
        raise EpisodeNotFound(f"{episode_id!r} matches {len(ids)} episodes: {', '.join(ids[:5])}…; give more characters")
    full = ids[0]

    def rows(table: str, columns: str, tail: str = "") -> list[dict]:
        return select(read.files_of(table, full), columns, f"WHERE episode_id = ? {tail}", [full])

    return {
        "episodes": rows("episodes", EPISODE),
        "repository": rows("episodes", NODES, "AND repository_json IS NOT NULL"),
        "steps": rows("steps", STEP, "ORDER BY request, step"),
        "transcript": rows("transcript", TRANSCRIPT, "ORDER BY seq"),
        "messages": rows("messages", MESSAGE, "ORDER BY seq"),
        "request_outcomes": rows("request_outcomes", "request, correct", "ORDER BY request"),
        "method_records": rows("method_records", "kind, count(*) AS n", "GROUP BY kind ORDER BY kind"),
        "faults": rows("faults", FAULT, "ORDER BY seq"),
    }


LISTED = "episode_id, cell, task_id AS task, trial, reward, status"


def list_episodes(runs: Path, *, cell: str | None = None, method: str | None = None, task: str | None = None,
                  status: str | None = None) -> list[dict[str, Any]]:
    """The episodes under ``runs`` (one copy of each, as every reader reads), for ``show``: ids with
    what tells them apart, in cell, task and trial order; ``cell`` matches part of a cell's label,
    the other filters a whole value."""
    try:
        read = read_set(sweep_dirs(runs))
    except NoResultsError:
        return []
    conditions = {"contains(cell, ?)": cell, "method = ?": method, "task_id = ?": task, "status = ?": status}
    given = {condition: value for condition, value in conditions.items() if value is not None}
    where = f"WHERE {' AND '.join(given)}" if given else ""
    return select(read.files["episodes"], LISTED, f"{where} ORDER BY cell, task_id, trial, episode_id",
                  list(given.values()))


def _clip(text: Any, limit: int = 160, chars: int | None = None) -> str:
    """One line of at most ``limit`` characters, with the whole length when it was cut."""
    text = "" if text is None else str(text).replace("\n", " ")
    total = len(text) if chars is None else chars
    if total <= limit:
        return text
    return text[: limit - 1] + "…" + (f" ({total:,} chars)" if total >= 1000 else "")


def render(data: dict[str, list[dict]]) -> Iterator[str]:
    ep = data["episodes"][0]
    yield f"episode {ep['episode_id']}  sweep {ep['sweep_id']}"
    yield f"  cell {ep['cell']}  task {ep['task_id']}  trial {ep['trial']}  seed {ep['seed']}"
    if ep["status"] == "failed":
        yield f"  FAILED after {ep['attempts']} attempt(s): {_clip(ep['error'], 2000, ep['error_chars'])}"
        yield from _fault_lines(data.get("faults") or [])
        return
    metrics = ", ".join(f"{k} {v:g}" for k, v in sorted((ep["metrics"] or {}).items()))
    reward = "no reward" if ep["reward"] is None else f"reward {ep['reward']}"
    basis = "; ".join(part for part in (ep["grading_basis"], metrics) if part)
    yield (f"  status {ep['status']} · termination {ep['termination']} · {reward}{f' ({basis})' if basis else ''}")
    yield (f"  {ep['n_requests']} requests · {ep['n_steps']} steps · {ep['n_parse_error_steps']} steps with parse errors · "
           f"{ep['n_tool_errors']} tool errors · {ep['duration_s']:.2f} s")
    yield (f"  tokens: #Tok {ep['tokens']} = agent {ep['agent_prompt_tokens']} prompt + {ep['agent_completion_tokens']} "
           f"completion{_cached(ep)}"
           f"{_role_tokens(ep, 'memory')}; beside it:{_role_tokens(ep, 'user_simulator')}{_role_tokens(ep, 'judge')}"
           f"{_role_tokens(ep, 'tool_model')}")
    graded = data.get("request_outcomes") or []
    if graded:
        yield ("  requests graded: " + " ".join(f"{r['request']}{'✓' if r['correct'] else '✗'}" for r in graded)
               + f" ({sum(bool(r['correct']) for r in graded)}/{len(graded)} correct)")
    yield from _fault_lines(data.get("faults") or [])
    records = data.get("method_records") or []
    if records:
        yield "  method records: " + ", ".join(f"{r['n']} {r['kind']}" for r in records)
    request = None
    for s in data["steps"]:
        if s["request"] != request:
            request = s["request"]
            yield ""
            yield f"request {request}: {_clip(s['query'], chars=s['query_chars'])}"
        yield from _step_lines(s)
    yield ""
    yield "conversation:"
    for m in data["transcript"]:
        if m["role"] == "tool":
            yield f"  tool{' (error)' if m['error'] else ''}: {_clip(m['content'], chars=m['content_chars'])}"
        elif m["tool_calls"]:
            yield "  assistant calls: " + "; ".join(f"{c['name']}({_clip(c['arguments'], 80)})" for c in m["tool_calls"])
        else:
            yield f"  {m['role']}: {_clip(m['content'], LONG, m['content_chars'])}"
    if data["messages"]:
        yield ""
        yield "model calls:"
        for m in data["messages"]:
            tokens = f"{m['prompt_tokens']} + {m['completion_tokens']} tokens, " if m["prompt_tokens"] is not None else ""
            yield (f"  {m['caller']}{_where(m)}: prompt {m['prompt_chars']:,} chars, "
                   f"{tokens}{m['latency_s'] or 0:.2f} s -> {_clip(m['completion'], 200, m['completion_chars'])}")
    nodes = data["repository"][0]["nodes"] if data.get("repository") else None
    if nodes is not None:
        tool = sum(n["origin"] == "tool" for n in nodes)
        yield ""
        yield f"final repository: {len(nodes)} nodes ({len(nodes) - tool} model, {tool} persisted observations)"
        for n in nodes:
            yield f"  [{n['source_request']}] {n['state_id']} ({n['type']}, {n['origin']}): {_clip(n['summary'], SHORT)}"


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


def _cached(ep: dict) -> str:
    """The agent's cached prompt tokens, as far as they are known (a server that reports none: nothing)."""
    parts = [f"{label} {ep[column]}" for label, column in (("cached", "agent_cached_tokens"),
                                                           ("estimated cached", "agent_cached_tokens_estimate"))
             if ep.get(column) is not None]
    return f" ({', '.join(parts)})" if parts else ""


def _where(message: dict) -> str:
    """The request and step a model call belongs to (a user simulator's or judge's call has neither)."""
    parts = [f"{key} {message[key]}" for key in ("request", "step") if message[key] is not None]
    return f" ({', '.join(parts)})" if parts else ""


def _role_tokens(ep: dict, role: str) -> str:
    prompt, completion = ep.get(f"{role}_prompt_tokens"), ep.get(f"{role}_completion_tokens")
    return "" if prompt is None and completion is None else f" {role} {prompt} + {completion}"


def _step_lines(s: dict) -> Iterator[str]:
    tokens = ("" if s["prompt_tokens"] is None
              else f"{s['prompt_tokens']} prompt / {s['completion_tokens']} completion tokens, ")
    yield f"  step {s['step']}: {tokens}{s['latency_s']:.2f} s, active state {s['active_nodes']} nodes"
    for op in s["accepted_ops"] or []:
        yield f"    + {op['operation']} {op['state_id']}"
    for op in s["rejected_ops"] or []:
        yield f"    ✗ {op['operation']} {op['state_id']}: {op['reason']} — {_clip(op['detail'], SHORT)}"
    if s["focus_requested"]:
        yield f"    focus {s['focus_requested']} -> disclosed {s['disclosed']}"
    for r in s["focus_rejected"] or []:
        yield f"    ✗ focus {r['state_id']}: {r['reason']}"
    for call in s["tool_calls"] or []:
        yield f"    tool {call['name']}({_clip(call['arguments_json'], SHORT)})"
    if s["observation_id"]:
        yield f"    -> {s['observation_id']} ({s['observation_chars']:,} chars, {s['tool_errors']} errors)"
    if s["assistant_message"]:
        yield f"    message: {_clip(s['assistant_message'], 300, s['assistant_message_chars'])}"
    for error in s["parse_errors"] or []:
        yield f"    parse error: {_clip(error, 200)}"
