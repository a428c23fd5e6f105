"""Where FlowState's prompt stops being a prefix of the previous call, and what its cache-friendly layout gains.

Usage:
  python perf/prompt_cache.py [--job jobs/oracle.yaml] [--job jobs/oracle-memoryarena.yaml]
  python perf/prompt_cache.py --smoke jobs/smoke-memoryarena.yaml [--smoke jobs/smoke.yaml]

Runs each job with three methods, FlowState in the paper's layout, FlowState with
``prompt_layout: cache_friendly`` and Full Context (with the job's own options), and reads back every
agent call. The oracle jobs (the default) are the deterministic test fixture, no model: each call's
tokens come from SmolLM2's own tokenizer and chat template, and its reusable prefix and physical limit
from the pipeline's own ledger (``pipeline.llm.prefix.PromptLedger``, as the client computes them
against a server): the leading prompt tokens identical to the previous call's prompt and completion,
and the prompt minus the content added since then. ``--smoke`` runs a SmolLM2 job on the real
llama.cpp server (minutes) and prints, beside the same analysis, what the client recorded per call
(``sql/tokens.sql``).

Per benchmark and method it prints: follow-up calls (a conversation's first call reuses nothing and
has no limit), prompt tokens, the reusable prefix and the physical limit as shares of the prompt, the
reusable prefix as a share of the limit (``cached_share_of_limit``), and where each follow-up call
first departs from the previous one: the block (the system message or a slot of the input template)
and how that block changed (``flowstate.prompt_blocks``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import machine  # noqa: E402

from flowstate import ChatMessage, TaskPrompt, method_options, new_session  # noqa: E402
from flowstate.prompt_blocks import departure  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
LAYOUT = {"prompt_layout": "cache_friendly"}


def three_methods(job: dict[str, Any], protocol: str | None) -> list[dict[str, Any]]:
    """FlowState in both layouts and Full Context with the job's own options (and protocol)."""
    own = {m["name"]: m for m in job["methods"]}
    base = {"protocol": protocol} if protocol else {}
    flowstate = {**own.get("flowstate", {}), "name": "flowstate", **base}
    return [flowstate, {**flowstate, **LAYOUT}, {**own.get("full_context", {}), "name": "full_context", **base}]


def variant(job_path: Path, folder: Path, limit: int | None) -> Path:
    """The job with the three methods only (and none of the roles or deployments only others use),
    and at most ``limit`` tasks per benchmark cell where given."""
    job = yaml.safe_load(job_path.read_text())
    if limit:
        for bench in job["benchmarks"]:
            bench.pop("tasks", None)
            bench["limit"] = limit
    protocol = next((m.get("protocol") for m in job["methods"] if m["name"] == "flowstate"), None)
    job["methods"] = three_methods(job, protocol)
    job["name"] = f"{job['name']}-cache"
    for role in ("memory", "embeddings"):
        use = job.pop(role, None)
        if isinstance(use, dict):
            job["deployments"].pop(use["deployment"], None)
    path = folder / job_path.name
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    return path


@dataclass
class Tally:
    calls: int = 0
    follow_ups: int = 0
    prompt: int = 0  # prompt tokens of the follow-up calls
    reusable: int = 0
    limit: int = 0
    departures: Counter[str] = field(default_factory=Counter)


def calls_by_episode(sweep_dir: Path) -> dict[str, list[tuple[list[ChatMessage], str]]]:
    """Every agent call's messages and completion, per episode, in call order."""
    messages = str(sweep_dir / "messages" / "**" / "*.parquet")
    rows = duckdb.sql(f"""SELECT episode_id, prompt_json, completion FROM read_parquet('{messages}',
                          hive_partitioning = false, union_by_name = true)
                          WHERE caller = 'agent' ORDER BY episode_id, seq""").fetchall()
    out: dict[str, list[tuple[list[ChatMessage], str]]] = defaultdict(list)
    for episode, prompt, completion in rows:
        out[episode].append(([ChatMessage.model_validate(m) for m in json.loads(prompt)], completion or ""))
    return out


def episode_cells(sweep_dir: Path) -> dict[str, tuple[str, str, str]]:
    """Each episode's (benchmark/domain, method label, method options JSON)."""
    episodes = str(sweep_dir / "episodes" / "**" / "*.parquet")
    rows = duckdb.sql(f"""SELECT episode_id, benchmark || '/' || domain, method, method_options_json
                          FROM read_parquet('{episodes}', hive_partitioning = false, union_by_name = true)""").fetchall()
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


def analyse(sweep_dir: Path) -> dict[tuple[str, str], Tally]:
    """The tally of every (benchmark/domain, method): tokens from SmolLM2's tokenizer, departures by block."""
    from pipeline.llm.counting import chat_tokenizer
    from pipeline.llm.prefix import PromptLedger

    tokenizer = chat_tokenizer("smollm2")
    cells = episode_cells(sweep_dir)
    templates: dict[str, str] = {}
    tallies: dict[tuple[str, str], Tally] = defaultdict(Tally)
    for episode, calls in calls_by_episode(sweep_dir).items():
        bench, method, options = cells[episode]
        if options not in templates:
            session = new_session(method_options(json.loads(options)), TaskPrompt(task_policy="", available_tools=""))
            templates[options] = session.input_template_text()
        tally, ledger, previous = tallies[(bench, method)], PromptLedger(), None
        for messages, completion in calls:
            prompt_ids = tokenizer.prompt_ids(messages)
            added = sum(tokenizer.count(piece) for piece in ledger.added(messages))
            reusable, limit = ledger.account("replica", prompt_ids, tokenizer.ids(completion), messages, completion, added)
            tally.calls += 1
            if previous is not None:
                tally.follow_ups += 1
                tally.prompt, tally.reusable, tally.limit = (
                    tally.prompt + len(prompt_ids), tally.reusable + reusable, tally.limit + limit)
                where = departure(previous, messages, templates[options])
                tally.departures[f"{where.block}: {where.change}" if where else "none: whole prompt reused"] += 1
            previous = [*messages, ChatMessage(role="assistant", content=completion)]
    return tallies


def _share(part: int | None, whole: int | None) -> str:
    return f"{(part or 0) / whole:.1%}" if whole else "-"


def show(tallies: dict[tuple[str, str], Tally]) -> None:
    print(f"\n{'benchmark/domain':<36} {'method':<32} {'calls':>6} {'follow-ups':>10} {'prompt tok':>11} "
          f"{'reusable':>9} {'limit':>7} {'reusable/limit':>14}")
    for (bench, method), t in sorted(tallies.items()):
        print(f"{bench:<36} {method:<32} {t.calls:>6} {t.follow_ups:>10} {t.prompt:>11,} "
              f"{_share(t.reusable, t.prompt):>9} {_share(t.limit, t.prompt):>7} {_share(t.reusable, t.limit):>14}")
    print("\nwhere each follow-up call first departs from the previous call (block: how it changed), share of calls")
    for (bench, method), t in sorted(tallies.items()):
        parts = ", ".join(f"{where} {n / t.follow_ups:.0%}" for where, n in t.departures.most_common())
        print(f"{bench:<36} {method:<32} {parts}")


def recorded(sweep_dir: Path) -> None:
    """What the client recorded per call against the real server (sql/tokens.sql)."""
    from pipeline.analysis.query import run_query

    table = run_query("tokens", sweep_dir.parent).to_pylist()
    print(f"\nrecorded by the client (sql/tokens.sql; shares of all calls' prompt tokens)\n"
          f"{'benchmark/domain':<36} {'method':<32} {'prompt tok':>11} "
          f"{'reusable':>9} {'limit':>7} {'cached_share_of_limit':>22}")
    for row in table:
        prompt, share = row["prompt_tokens"], row["cached_share_of_limit"]
        print(f"{row['benchmark'] + '/' + row['domain']:<36} {row['method']:<32} {prompt or 0:>11,} "
              f"{_share(row['reusable_prefix_tokens'], prompt):>9} {_share(row['physical_limit_tokens'], prompt):>7} "
              f"{'-' if share is None else f'{share:.1%}':>22}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", action="append", type=Path, help="an oracle job (default: both oracle jobs)")
    parser.add_argument("--smoke", action="append", type=Path, help="a SmolLM2 job on llama.cpp (slow)")
    parser.add_argument("--limit", type=int, help="at most this many tasks per benchmark and domain")
    args = parser.parse_args()
    os.environ.setdefault("FLOWSTATE_DATA", str(REPO.parent / "shared" / "benchmarks"))
    print(machine())
    from pipeline.run.launch import run_sweep

    jobs = [(j, False) for j in args.job or []] + [(j, True) for j in args.smoke or []]
    jobs = jobs or [(REPO / "jobs" / "oracle.yaml", False), (REPO / "jobs" / "oracle-memoryarena.yaml", False)]
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{Path(scratch) / 'mlflow.db'}"  # not the user's store
        for job_path, smoke in jobs:
            result = run_sweep(variant(job_path, Path(scratch), args.limit), out=Path(scratch) / job_path.stem)
            assert result is not None
            print(f"\n{job_path.name}: {result.completed} episodes in {result.duration_s:.0f} s "
                  f"({result.failed} failed)")
            if result.interrupted or not result.completed:
                print("interrupted or nothing finished: no figures")
                break
            show(analyse(result.sweep_dir))
            if smoke:
                recorded(result.sweep_dir)


if __name__ == "__main__":
    main()
