"""τ-bench episodes in the results format of upstream tau2-bench (``Results`` in
``src/tau2/data_model/simulation.py``), to open with the upstream viewer and re-check with the
upstream evaluator.

One results file holds one agent on one domain (upstream's ``info`` describes a single agent and
environment), so a run with several τ-bench cells writes one file per cell.

Filled: ``info`` (git_commit = code version, num_trials, max_steps / max_errors = the job's
max_env_steps / max_errors, seed, agent_info and user_info with model and sampling,
environment_info with domain and policy), ``tasks`` (the upstream task records of the exported
tasks, verbatim from the pinned data), and per simulation ``id`` (episode id), ``task_id``,
``trial``, ``seed``, ``start_time`` / ``end_time`` / ``timestamp`` (ISO), ``duration``,
``termination_reason``, ``messages`` (the transcript: assistant, user and tool messages with
``turn_idx``; tool calls with id, name, arguments, requestor "assistant"; tool results with the
call id and error flag) and ``reward_info`` (reward, reward_basis, reward_breakdown, db_check,
communicate_checks, nl_assertions with the judge's reasoning as justification, action_checks with
the gold action and tool_type), and ``info.flowstate`` (FlowState's own ids, labels and totals;
newer upstream versions keep ``info``, older ones ignore it).

Left empty (null): costs (``agent_cost``, ``user_cost``, message ``cost``), message ``usage``,
``raw_data`` and ``timestamp`` (not recorded per message), ``env_assertions`` (no airline/retail
task has any), communicate-check ``justification`` (""), ``tool_defs``. ``tasks`` and the policy
are empty when the τ-bench data directory is not available (upstream's viewer still opens the file;
its DataFrame helpers, which look up each simulation's task, then fail).

Exported: scored episodes only (status completed). Infrastructure failures are left out (upstream
retries them; newer versions record them as infrastructure_error and exclude them from metrics),
and so are grading failures (no reward to report). A FlowState termination that upstream does not
know (no_request, environment_done) is exported as agent_error, the original kept in
``info.flowstate.termination``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from pipeline.analysis.query import connect
from pipeline.benchmarks.taubench.data import DataDir, TauBenchDataError, load_parsed
from pipeline.core.atomic import write_text_atomic
from pipeline.store.files import NoResultsError, sweep_dirs
from pipeline.store.manifest import read_manifest

UPSTREAM_TERMINATIONS = ("user_stop", "agent_stop", "max_steps", "too_many_errors", "agent_error", "user_error")
Row = dict[str, Any]


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: dict[str, Any]
    requestor: Literal["assistant"] = "assistant"


class ParticipantMessage(BaseModel):
    role: Literal["assistant", "user"]
    content: str | None
    tool_calls: list[ToolCall] | None
    turn_idx: int
    timestamp: str | None = None
    cost: float | None = None
    usage: dict[str, Any] | None = None
    raw_data: dict[str, Any] | None = None


class ToolMessage(BaseModel):
    id: str
    role: Literal["tool"] = "tool"
    content: str | None
    requestor: Literal["assistant"] = "assistant"
    error: bool
    turn_idx: int
    timestamp: str | None = None


class RewardInfo(BaseModel):
    reward: float
    db_check: dict[str, Any] | None = None
    env_assertions: list[dict[str, Any]] | None = None
    action_checks: list[dict[str, Any]] | None = None
    nl_assertions: list[dict[str, Any]] | None = None
    communicate_checks: list[dict[str, Any]] | None = None
    reward_basis: list[str]
    reward_breakdown: dict[str, float] | None = None
    info: dict[str, Any] | None = None


class Simulation(BaseModel):
    id: str
    task_id: str
    timestamp: str
    start_time: str
    end_time: str
    duration: float
    termination_reason: str
    agent_cost: float | None = None
    user_cost: float | None = None
    reward_info: RewardInfo
    messages: list[ParticipantMessage | ToolMessage]
    trial: int
    seed: int | None
    info: dict[str, Any]


class Results(BaseModel):
    timestamp: str
    info: dict[str, Any]
    tasks: list[dict[str, Any]]
    simulations: list[Simulation]


class UnfaithfulExportError(ValueError):
    """An episode that upstream's format cannot hold as it ran."""


def _message(row: Row) -> ParticipantMessage | ToolMessage:
    if row["role"] == "tool":
        return ToolMessage(id=row["tool_call_id"] or "", content=row["content"], error=bool(row["error"]), turn_idx=row["seq"])
    calls = json.loads(row["tool_calls_json"]) if row["tool_calls_json"] else None
    for c in calls or []:
        if not isinstance(c.get("arguments"), dict):  # recorded before such calls became protocol errors
            raise UnfaithfulExportError(f"the arguments of its {c.get('name')!r} call are not an object "
                                        f"({json.dumps(c.get('arguments'))})")
    return ParticipantMessage(role=row["role"], content=row["content"], turn_idx=row["seq"],
                              tool_calls=[ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"])
                                          for c in calls] if calls else None)


def _grading_record(episode: Row) -> dict[str, Any]:
    """The stored grading record; rows written without one (hand-made or older) keep their reward."""
    if episode["grading_json"]:
        return json.loads(episode["grading_json"])
    return {"reward": episode["reward"], "graded": episode["graded"], "termination": episode["termination"]}


def _reward_info(raw: dict[str, Any], gold: dict[str, dict[str, Any]]) -> RewardInfo:
    """FlowState's grading record (pipeline.benchmarks.taubench.RewardInfo) in upstream's shape."""
    db = raw.get("db")
    info: dict[str, Any] = {"flowstate_basis": raw.get("basis"), "graded": raw.get("graded"),
                            "read_accuracy": raw.get("read_accuracy"), "write_accuracy": raw.get("write_accuracy")}
    if db:
        info["db_hashes"] = {"predicted": db.get("predicted_hash"), "gold": db.get("gold_hash")}
    if not raw.get("graded"):
        info["note"] = f"Simulation terminated prematurely. Termination reason: {raw.get('termination')}"
    return RewardInfo(
        reward=raw["reward"],
        db_check={"db_match": db["match"], "db_reward": float(db["match"])} if db else None,
        action_checks=[{"action": gold.get(c["action_id"], {"action_id": c["action_id"], "name": c["name"], "arguments": {}}),
                        "action_match": c["matched"], "action_reward": float(c["matched"]), "tool_type": c.get("kind")}
                       for c in raw.get("action_checks", [])] or None,
        nl_assertions=[{"nl_assertion": c["assertion"], "met": c["met"], "justification": c["reasoning"]}
                       for c in raw.get("nl_assertion_checks", [])] or None,
        communicate_checks=[{"info": c["info"], "met": c["met"], "justification": ""}
                            for c in raw.get("communicate_checks", [])] or None,
        reward_basis=list(raw.get("reward_basis", [])),
        reward_breakdown=raw.get("components") or None,
        info=info,
    )


def _upstream_data(domain: str, data_dir: DataDir) -> tuple[list[dict[str, Any]], str]:
    """(raw upstream task records, policy text), or ([], "") without the data directory."""
    try:
        tasks = load_parsed(f"{domain}/tasks.json", json.loads, data_dir)
        policy = load_parsed(f"{domain}/policy.md", bytes.decode, data_dir)
    except TauBenchDataError:
        return [], ""
    return tasks, policy


def _job_info(manifest: dict[str, Any] | None, domain: str, model: str, method: str, trials: int) -> dict[str, Any]:
    manifest = manifest or {}
    job = manifest.get("job", {})
    bench: dict[str, Any] = next((b for b in job.get("benchmarks", []) if b.get("domain") == domain), {})
    agent: dict[str, Any] = next((a for a in job.get("agents", []) if (a.get("label") or a.get("deployment")) == model), {})
    user = job.get("user_simulator") if isinstance(job.get("user_simulator"), dict) else {}

    def served(use: dict[str, Any], fallback: str | None) -> str | None:
        """The model a deployment served (its name when the manifest does not say)."""
        deployment = manifest.get("deployments", {}).get(use.get("deployment"), {})
        return deployment.get("model") or use.get("deployment") or fallback

    return {
        "git_commit": manifest.get("code_version", ""),
        "num_trials": job.get("trials", trials),
        "max_steps": bench.get("max_env_steps", 200),
        "max_errors": bench.get("max_errors", 10),
        "user_info": {"implementation": "user_simulator" if user else "scripted_user", "llm": served(user, None),
                      "llm_args": user.get("sampling"), "global_simulation_guidelines": None},
        "agent_info": {"implementation": f"flowstate:{method}", "llm": served(agent, model),
                       "llm_args": agent.get("sampling")},
        "seed": job.get("seed"),
    }


def _cell_results(episodes: list[Row], transcript: dict[tuple[str, str], list[Row]], manifest: dict[str, Any] | None,
                  data_dir: DataDir, skipped: list[str]) -> Results:
    """The cell's simulations; episodes upstream's format cannot hold as they ran go to ``skipped``."""
    first = episodes[0]
    tasks, policy = _upstream_data(first["domain"], data_dir)
    task_ids = {e["task_id"] for e in episodes}
    gold = {t["id"]: {a["action_id"]: a for a in t["evaluation_criteria"].get("actions") or []} for t in tasks}
    simulations = []
    for e in episodes:
        termination = e["termination"] if e["termination"] in UPSTREAM_TERMINATIONS else "agent_error"
        try:
            messages = [_message(m) for m in transcript.get((e["sweep_id"], e["episode_id"]), [])]
        except UnfaithfulExportError as exc:
            skipped.append(f"{e['episode_id']} (task {e['task_id']}): {exc}")
            continue
        simulations.append(Simulation(
            id=e["episode_id"], task_id=e["task_id"], timestamp=e["finished_at"].isoformat(),
            start_time=e["started_at"].isoformat(), end_time=e["finished_at"].isoformat(), duration=e["duration_s"],
            termination_reason=termination, trial=e["trial"], seed=e["seed"],
            reward_info=_reward_info(_grading_record(e), gold.get(e["task_id"], {})),
            messages=messages,
            info={"flowstate": {k: e[k] for k in ("episode_id", "sweep_id", "cell", "method", "model", "termination",
                                                  "grading_basis", "n_requests", "n_steps", "agent_prompt_tokens",
                                                  "agent_completion_tokens")}},
        ))
    info = _job_info(manifest, first["domain"], first["model"], first["method"], max(e["trial"] for e in episodes) + 1)
    info["environment_info"] = {"domain_name": first["domain"], "policy": policy, "tool_defs": None}
    return Results(timestamp=max(e["finished_at"] for e in episodes).isoformat(), info=info,
                   tasks=[t for t in tasks if t["id"] in task_ids], simulations=simulations)


@dataclass(frozen=True)
class Exported:
    paths: list[Path]
    skipped: list[str]  # episodes left out, each with why


def export_tau2(runs_dir: Path | str, out_json: Path | str, *, data_dir: DataDir = None) -> Exported:
    """Write upstream results JSON: ``out_json`` for one cell, ``<stem>.<cell label>.json`` for several.

    The export is what ran: an episode it could only write by changing a call (arguments that are
    not an object, from sweeps recorded before those became protocol errors) is left out and named."""
    runs_dir, out_json = Path(runs_dir), Path(out_json)
    manifests = {(m or {}).get("sweep_id", d.name): m for d in sweep_dirs(runs_dir) for m in [read_manifest(d)]}
    with connect(runs_dir) as con:
        episodes = con.sql("SELECT * FROM scored WHERE benchmark = 'taubench' "
                           "ORDER BY sweep_id, cell, task_id, trial").to_arrow_table().to_pylist()
        rows = con.sql("SELECT t.* FROM transcript AS t "
                       "SEMI JOIN (SELECT sweep_id, episode_id FROM scored WHERE benchmark = 'taubench') "
                       "USING (sweep_id, episode_id) ORDER BY t.sweep_id, t.episode_id, t.seq").to_arrow_table().to_pylist()
    if not episodes:
        raise NoResultsError(f"{runs_dir}: no scored τ-bench episodes to export")
    # Episode ids repeat across sweeps (a job sharing cells with another): key by both.
    transcript: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for r in rows:
        transcript[(r["sweep_id"], r["episode_id"])].append(r)
    cells: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for e in episodes:
        cells[(e["sweep_id"], e["cell"])].append(e)
    several_sweeps = len({sweep for sweep, _ in cells}) > 1
    written: list[Path] = []
    skipped: list[str] = []
    for (sweep_id, label), cell_episodes in sorted(cells.items()):
        results = _cell_results(cell_episodes, transcript, manifests.get(sweep_id), data_dir, skipped)
        name = f"{sweep_id}.{label}" if several_sweeps else label
        path = out_json if len(cells) == 1 else out_json.with_name(f"{out_json.stem}.{name}.json")
        write_text_atomic(path, results.model_dump_json(indent=2))
        written.append(path)
    return Exported(paths=written, skipped=skipped)
