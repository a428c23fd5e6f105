"""MemoryArena through the whole pipeline: the oracle sweep on the synthetic examples (SR = PS = 1 for
every method, resume, Parquet, SQL, the report's tables and Figure 4, MLflow) and the embedded default
(SmolLM2 on llama.cpp as agent, judge and tool model) on one math task, one two-traveller travel task
and one shopping task in the store."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from mlflow import MlflowClient

from pipeline.cli.main import main
from pipeline.run.launch import SweepResult, run_sweep
from tests.conftest import REPO_ROOT
from tests.pipeline.llm.llamacpp import require_llamacpp

pytestmark = pytest.mark.slow

ORACLE_JOB = REPO_ROOT / "jobs" / "oracle-memoryarena.yaml"
METHODS = {"flowstate", "full_context", "flowstate_no_psa", "flowstate_no_isu", "bm25", "zipact", "zipact-separate",
           "zipact_bm25", "reasoningbank", "mem0"}
TASKS = {"bundled_shopping": 3, "formal_reasoning_math": 4, "formal_reasoning_phys": 3, "group_travel_planner": 5}
SUBTASKS = {"bundled_shopping": 18, "formal_reasoning_math": 12, "formal_reasoning_phys": 10, "group_travel_planner": 13}


def rows(sweep: Path, table: str, sql: str) -> list[tuple]:
    files = str(sweep / table / "**" / "*.parquet")
    return duckdb.sql(sql.replace("{T}", f"read_parquet('{files}', union_by_name = true, hive_partitioning = false)")).fetchall()


@pytest.fixture(scope="module")
def oracle_sweep(ray_local, tmp_path_factory) -> tuple[SweepResult, Path]:
    out = tmp_path_factory.mktemp("oracle-memoryarena")
    return run_sweep(ORACLE_JOB, out=out), out


def test_the_oracle_solves_every_subtask_with_every_method(oracle_sweep) -> None:
    result, _ = oracle_sweep
    episodes = sum(TASKS.values()) * len(METHODS)
    assert (result.completed, result.failed, result.grading_failed) == (episodes, 0, 0)
    assert rows(result.sweep_dir, "episodes", "SELECT domain, count(*), bool_and(success), min(reward), "
                                              "min(metrics['ps_numerator'] = metrics['ps_denominator']) "
                                              "FROM {T} GROUP BY domain ORDER BY domain") == [
        (domain, n * len(METHODS), True, 1.0, True) for domain, n in sorted(TASKS.items())]
    # every subtask is a request of its own, graded on its own; each ended by the agent's answer
    graded = rows(result.sweep_dir, "request_outcomes", "SELECT domain, count(*), bool_and(correct) FROM {T} "
                                                        "GROUP BY domain ORDER BY domain")
    assert graded == [(domain, n * len(METHODS), True) for domain, n in sorted(SUBTASKS.items())]
    assert rows(result.sweep_dir, "episodes", "SELECT DISTINCT termination FROM {T}") == [("requests_done",)]
    # travel looks the facts up with its tools; formal reasoning asks the reasoning tool (the tool
    # model: the oracle again) once per task, on the first subtask
    tools = dict(rows(result.sweep_dir, "steps", "SELECT domain, count(*) FILTER (WHERE len(tool_calls) > 0) "
                                                 "FROM {T} GROUP BY domain"))
    assert tools["group_travel_planner"] > 0
    # shopping: per product step a search, a click on the target and Buy Now, each bought from the store
    assert tools["bundled_shopping"] == 3 * SUBTASKS["bundled_shopping"] * len(METHODS)
    assert rows(result.sweep_dir, "request_outcomes", "SELECT DISTINCT reason FROM {T} "
                                                      "WHERE domain = 'bundled_shopping'") == [("asin_match",)]
    assert tools["formal_reasoning_math"] == TASKS["formal_reasoning_math"] * len(METHODS)
    assert rows(result.sweep_dir, "messages", "SELECT count(*) FROM {T} WHERE caller = 'tool_model'") == [
        ((TASKS["formal_reasoning_math"] + TASKS["formal_reasoning_phys"]) * len(METHODS),)]
    assert not list(result.sweep_dir.rglob("*.tmp"))


def test_a_second_run_finds_every_episode_and_runs_none(oracle_sweep) -> None:
    result, out = oracle_sweep
    again = run_sweep(ORACLE_JOB, out=out)
    assert (again.sweep_id, again.skipped, again.completed) == (result.sweep_id, result.episodes, 0)
    assert rows(result.sweep_dir, "episodes", "SELECT count(*), count(DISTINCT episode_id) FROM {T}") == [
        (result.episodes, result.episodes)]


def test_sql_report_and_mlflow_show_sr_ps_and_depth(oracle_sweep, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    result, _ = oracle_sweep
    assert main(["query", "scores", "--runs", str(result.sweep_dir), "--format", "json"]) == 0
    scores = {(r["domain"], r["method"], r["metric"]): r["value"] for r in json.loads(capsys.readouterr().out)}
    for domain in TASKS:
        for method in METHODS:
            assert scores[(domain, method, "SR")] == scores[(domain, method, "PS")] == 1.0
    assert scores[("group_travel_planner", "flowstate", "sPS")] == 1.0
    assert scores[("formal_reasoning_math", "flowstate", "sPS")] is None  # undefined outside travel: NULL, not 0
    assert main(["query", "depth_accuracy", "--runs", str(result.sweep_dir), "--format", "json"]) == 0
    depth = json.loads(capsys.readouterr().out)
    # math and physics pooled
    assert {r["domain"] for r in depth} == {"bundled_shopping", "formal_reasoning", "group_travel_planner"}
    assert {r["acc_k"] for r in depth} == {100.0} and max(r["k"] for r in depth) == 6

    # Every memory method retrieved once per subtask and stored upstream's entries (the initial
    # memory, then one per subtask); BM25 keeps at most 3 pieces, ReasoningBank 5 records
    assert main(["query", "retrieval", "--runs", str(result.sweep_dir), "--format", "json"]) == 0
    retrieval = {(r["domain"], r["method"]): r for r in json.loads(capsys.readouterr().out)}
    assert set(retrieval) == {(d, m) for d in TASKS for m in ("bm25", "zipact_bm25", "reasoningbank", "mem0")}
    for (domain, method), row in retrieval.items():
        assert row["retrievals"] == SUBTASKS[domain] and row["writes"] >= SUBTASKS[domain]
        assert 0 < row["hits_mean"] <= {"reasoningbank": 5, "mem0": 20}.get(method, 3)
        assert row["written"] >= row["writes"] if method != "mem0" else row["written"] > 0

    # ReasoningBank judged every entry (the fixture: success) and kept the fixture's one item per
    # entry; Mem0 added the fixture's memory for each
    assert main(["query", "memory_writes", "--runs", str(result.sweep_dir), "--format", "json"]) == 0
    writes = json.loads(capsys.readouterr().out)
    assert {r["method"] for r in writes} == {"reasoningbank", "mem0"}
    assert {(r["method"], r["status"]) for r in writes} == {("reasoningbank", "success"), ("mem0", None)}
    assert {r["items"] for r in writes if r["method"] == "reasoningbank" or r["domain"] != "bundled_shopping"} == {1}
    # shopping stores one entry per action, and an action's entry mostly repeats its step's instruction:
    # Mem0 adds nothing for an entry the fixture's update finds it already holds
    shop = [r["items"] for r in writes if r["method"] == "mem0" and r["domain"] == "bundled_shopping"]
    assert len(shop) == 3 * SUBTASKS["bundled_shopping"] and set(shop) == {0, 1}
    assert all(r["titles"] and r["titles"][0] for r in writes if r["items"])

    # their own model calls, per request: ReasoningBank judges and extracts (2 per entry); all embed
    assert main(["query", "method_calls", "--runs", str(result.sweep_dir), "--format", "json"]) == 0
    calls = {(r["domain"], r["method"], r["caller"]): r for r in json.loads(capsys.readouterr().out)}
    assert {(m, c) for _, m, c in calls} == {("zipact-separate", "memory"), ("reasoningbank", "memory"),
                                             ("reasoningbank", "embeddings"), ("mem0", "memory"), ("mem0", "embeddings")}
    assert all(row["calls_per_request"] >= 1 and row["p50_s"] is not None for row in calls.values())
    assert all(calls[(d, "reasoningbank", "memory")]["calls"] % 2 == 0 for d in TASKS)
    assert all(calls[(d, "mem0", "embeddings")]["tokens_per_request"] > 0 for d in TASKS)  # WordLlama counts tokens

    # ZipAct's updates: inline ones from the agent's output (the oracle writes none: the old state is
    # kept), separate ones from the updater fixture after each subtask start and each observation
    assert main(["query", "state_tracking", "--runs", str(result.sweep_dir), "--format", "json"]) == 0
    tracking = {(r["domain"], r["method"], r["updater"]): r for r in json.loads(capsys.readouterr().out)}
    assert set(tracking) == {(d, m, u) for d in TASKS for m, u in (("zipact", "inline"), ("zipact-separate", "separate"),
                                                                  ("zipact_bm25", "inline"))}
    for (domain, _, updater), row in tracking.items():
        assert row["failed_share"] == (0.0 if updater == "separate" else 1.0)
        assert row["updates"] >= SUBTASKS[domain]

    report = tmp_path / "report.md"
    assert main(["report", str(result.sweep_dir), "--out", str(report)]) == 0
    text = report.read_text()
    assert "## Table 1: results per environment" in text and "baseline: `full_context`" in text
    header = next(line for line in text.splitlines() if line.startswith("| Model | Method | Shopping SR"))
    assert "| Math SR | Math PS |" in header and "| Physics SR | Physics PS |" in header
    assert "| Travel sPS | Travel #Tok |" in header
    assert "| oracle | Δ flowstate vs. full_context | +0.0 | +0.0 |" in text
    assert "## Table 4: depth retention" in text and (tmp_path / "report_fig4_depth.png").is_file()

    assert result.finish_errors == []  # compaction and MLflow logging (every query's summary artifact) succeeded
    manifest = json.loads((result.sweep_dir / "manifest.json").read_text())
    client = MlflowClient(result.tracking_uri)
    cells = client.search_runs([client.get_experiment_by_name("flowstate-oracle-memoryarena").experiment_id],
                               f"tags.`mlflow.parentRunId` = '{manifest['mlflow_run_id']}'")
    assert len(cells) == len(TASKS) * len(METHODS)
    for run in cells:
        assert run.data.metrics["SR"] == run.data.metrics["PS"] == 1.0
        if run.data.tags["method"] == "flowstate":
            assert run.data.metrics["vs_baseline.d_SR"] == 0.0


def test_the_report_sets_the_papers_figures_beside_the_sweeps(oracle_sweep, tmp_path: Path) -> None:
    """Tables 1, 3, 4 and 5 of the paper beside a real sweep's cells: a column per paper model, blank
    where the paper has no figure from that model."""
    result, _ = oracle_sweep
    report = tmp_path / "report.md"
    assert main(["report", str(result.sweep_dir), "--out", str(report)]) == 0
    text = report.read_text()
    lines = text[text.index("## The paper beside this sweep"):text.index("## Cost")].splitlines()
    assert ("| Domain | Model | Method | Metric | this sweep | paper, DeepSeek-V4-Flash | paper, GPT-5.6-terra "
            "| paper, Qwen3.5-397B-A17B |") in lines
    assert "| bundled_shopping | oracle | full_context | PS | 100.0 | 21.11 | 33.89 | 19.56 |" in lines
    assert "| group_travel_planner | oracle | full_context | SR | 100.0 | 0.37 |  | 0.37 |" in lines  # GPT: "–"
    assert "| bundled_shopping | oracle | flowstate | Δ PS vs. full_context | +0.0 | +21.78 | +17.55 | +17.66 |" in lines
    assert "| group_travel_planner | oracle | flowstate_no_psa | sPS | 100.0 | 87.18 |  |  |" in lines  # Table 3
    formal = [line for line in lines if line.startswith("| formal_reasoning | oracle | mem0 |")]  # Table 4's panel
    assert formal == ["| formal_reasoning | oracle | mem0 | nAUC | 100 | 52.41 |  |  |",
                      "| formal_reasoning | oracle | mem0 | DR | 0 | 5.50 |  |  |"]


def test_the_embedded_default_runs_math_travel_and_shopping_on_a_real_model(ray_local, tmp_path: Path) -> None:
    """jobs/smoke-memoryarena.yaml as shipped: SmolLM2 is the agent, the judge and the tool model."""
    require_llamacpp()
    result = run_sweep(REPO_ROOT / "jobs" / "smoke-memoryarena.yaml", out=tmp_path / "runs")
    assert (result.completed + result.grading_failed, result.failed) == (6, 0)
    assert rows(result.sweep_dir, "episodes", "SELECT domain, count(*), min(n_requests) FROM {T} "
                                              "GROUP BY domain ORDER BY domain") == [
        ("bundled_shopping", 2, 6), ("formal_reasoning_math", 2, 2), ("group_travel_planner", 2, 2)]
    # every product step ran in the store and was graded on its own (capped at one action: no purchase)
    assert rows(result.sweep_dir, "request_outcomes", "SELECT count(*), count(*) FILTER (WHERE NOT correct) FROM {T} "
                                                      "WHERE domain = 'bundled_shopping'") == [(12, 12)]
    calls = dict(rows(result.sweep_dir, "messages", "SELECT caller, count(*) FILTER (WHERE prompt_tokens > 0) "
                                                    "FROM {T} GROUP BY caller"))
    assert calls["agent"] > 0 and calls["judge"] == 4  # each math subtask judged once, per method
    assert set(calls) <= {"agent", "judge", "tool_model"}
    # the judge's and the tool model's tokens are counted apart from #Tok
    tokens = rows(result.sweep_dir, "episodes", "SELECT bool_and(tokens = agent_prompt_tokens + agent_completion_tokens), "
                                                "sum(judge_prompt_tokens) > 0 FROM {T}")
    assert tokens == [(True, True)]


def test_a_travel_sweep_made_before_the_text_revision_is_graded_and_never_resumed_onto(
        ray_local, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Group travel's cells changed ids (text_revision): a sweep made with the old ids is graded by the
    cell ids its manifest lists, and the same job now makes a new sweep, not a resume of the old one."""
    import asyncio

    import yaml

    from pipeline.benchmarks.memoryarena import benchmark
    from pipeline.run.plan import locate_sweep
    from pipeline.run.regrade import regrade
    from tests.pipeline.benchmarks.memoryarena.conftest import example_tasks

    job = {"name": "travel", "benchmarks": [{"benchmark": "memoryarena", "domain": "group_travel_planner",
                                             "source": "examples", "tasks": [str(example_tasks("group_travel_planner")[0].id)]}],
           "methods": [{"name": "full_context"}], "agents": [{"deployment": "oracle"}], "judge": "scripted",
           "deployments": {"oracle": {"kind": "scripted", "name": "oracle"}}, "limits": {"max_steps_per_request": 60}}
    path = tmp_path / "travel.yaml"
    path.write_text(yaml.safe_dump(job))
    with monkeypatch.context() as before:
        before.setattr(benchmark, "TEXT_REVISIONS", {})
        old = run_sweep(path, out=tmp_path / "runs")
    assert (old.completed, old.failed) == (1, 0)
    summary = asyncio.run(regrade(old.sweep_dir))
    assert (summary.episodes, summary.changed, summary.mean_reward) == (1, 0, 1.0)
    sweep, sweep_dir = locate_sweep(path, out=tmp_path / "runs")
    assert sweep_dir != old.sweep_dir and not set(sweep.episodes.ids()) & set(rows(old.sweep_dir, "episodes",
                                                                                  "SELECT episode_id FROM {T}")[0])


def test_the_estimate_s_own_model_calls_are_what_the_oracle_measured(oracle_sweep) -> None:
    """What each method declares it calls of its own models (``own_calls``), given the measured shape of
    each episode (requests, steps, tool steps, the benchmark's memory entries and their size), against
    the calls and tokens the oracle sweep recorded, per method over all its episodes.

    Calls within 5%: the declarations count them exactly, except that a task without initial memory
    (shopping) has nothing to search on its first request, which a shape does not say (1 in 24).
    Tokens within 25%: the estimate counts four characters a token where the sweep counts SmolLM2's
    tokens, gives every entry and observation of a domain one size, and guesses no completion."""
    from flowstate import METHODS as REGISTERED
    from flowstate import EpisodeShape, estimate_tokens
    from flowstate.methods.reasoningbank import JUDGE_QUESTION, JUDGE_SYSTEM
    from pipeline.benchmarks.base import episode_prompt
    from pipeline.run.plan import plan_sweep

    result, out = oracle_sweep
    cells = {cell.cell_id: cell for cell in plan_sweep(ORACLE_JOB, out=out).sweep.cells}
    sweep = result.sweep_dir
    # the benchmark's entries: each is in ReasoningBank's judge call, and of the same size for every method
    judged = rows(sweep, "messages", "SELECT domain, prompt_json FROM {T} WHERE caller = 'memory'")
    sizes: dict[str, list[int]] = {}
    for domain, prompt in judged:
        system, user = (m["content"] for m in json.loads(prompt))
        if system == JUDGE_SYSTEM:
            sizes.setdefault(domain, []).append(estimate_tokens(user.removesuffix(JUDGE_QUESTION)))
    entries = dict(((d, t), n) for d, t, n in rows(sweep, "method_records", "SELECT domain, task_id, count(*) FROM {T} "
                                                   "WHERE method = 'reasoningbank' AND kind = 'write' GROUP BY ALL"))
    calls = {episode: counts for episode, *counts in rows(sweep, "messages", """
        SELECT episode_id, count(*) FILTER (WHERE caller = 'agent'), count(*) FILTER (WHERE caller = 'memory'),
               count(*) FILTER (WHERE caller = 'embeddings'),
               sum(coalesce(prompt_tokens, 0) + coalesce(completion_tokens, 0)) FILTER (WHERE caller IN ('memory', 'embeddings'))
        FROM {T} GROUP BY ALL""")}
    tool_steps = dict(rows(sweep, "steps", "SELECT episode_id, count(*) FILTER (WHERE len(tool_calls) > 0) FROM {T} "
                                           "GROUP BY ALL"))
    measured: dict[str, list[float]] = {}
    declared: dict[str, list[float]] = {}
    for episode, cell_id, domain, task, requests in rows(sweep, "episodes", "SELECT episode_id, cell_id, domain, task_id, "
                                                                           "n_requests FROM {T}"):
        cell = cells[cell_id]
        steps, mem, emb, tok = calls[episode]
        shape = EpisodeShape(requests=requests, steps=steps, observations=tool_steps[episode],
                             memory_entries=entries[(domain, task)], entry_tokens=sum(sizes[domain]) / len(sizes[domain]))
        own = REGISTERED.get(cell.method.name).own_calls(cell.method, episode_prompt(cell.benchmark, task), shape)
        for into, values in ((measured, (mem, emb, tok or 0)),
                             (declared, (own.memory, own.embeddings, own.memory_tokens + own.embedding_tokens))):
            into[cell.method.display] = [a + b for a, b in zip(into.get(cell.method.display, [0, 0, 0]), values, strict=True)]
    assert set(measured) == METHODS
    for method in METHODS:
        (mem, emb, tok), (own_mem, own_emb, own_tok) = measured[method], declared[method]
        if method in ("mem0", "reasoningbank", "zipact-separate"):
            assert mem > 0 and tok > 0, method
        assert own_mem == pytest.approx(mem, rel=0.05) and own_emb == pytest.approx(emb, rel=0.05), method
        assert own_tok == pytest.approx(tok, rel=0.25), (method, own_tok, tok)
