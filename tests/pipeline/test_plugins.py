"""A third benchmark and more methods, living only in examples/ (tiny, last_n), run through the whole
pipeline with no change under pipeline/ or flowstate/: the CLI on real local Ray, Parquet rows, SQL,
the report, MLflow and re-grading all show them. This is the proof that a benchmark or a method is
one module."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
import yaml
from mlflow import MlflowClient

from pipeline.cli.main import main
from pipeline.config.job import ConfigError, load_job
from pipeline.core.plugins import load_plugins
from pipeline.store.manifest import prompt_templates_hash

pytestmark = pytest.mark.slow

JOB = {
    "name": "plugins",
    "plugins": ["examples.tiny", "examples.last_n"],
    "benchmarks": [{"benchmark": "tiny"}],
    "methods": [{"name": "last_n", "window": 2}, {"name": "flowstate", "protocol": "json"}],
    "agents": [{"deployment": "oracle"}],
    "deployments": {"oracle": {"kind": "scripted", "name": "oracle"}},
    "execution": {"concurrency": 4},
    "tracking": {"experiment": "flowstate-plugins"},
    "analysis": {"baseline": "last_n"},
}


def rows(sweep: Path, table: str, sql: str) -> list[tuple]:
    files = str(sweep / table / "**" / "*.parquet")
    return duckdb.sql(sql.replace("{T}", f"read_parquet('{files}', union_by_name = true, hive_partitioning = false)")).fetchall()


@pytest.fixture(scope="module")
def plugin_sweep(ray_local, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("plugins")
    (root / "plugins.yaml").write_text(yaml.safe_dump(JOB))
    assert main(["run", str(root / "plugins.yaml"), "--out", str(root / "runs")]) == 0
    [sweep] = [d for d in (root / "runs").iterdir() if d.is_dir()]
    return sweep


def test_a_plugin_benchmark_and_method_run_end_to_end(plugin_sweep: Path) -> None:
    episodes = rows(plugin_sweep, "episodes", "SELECT method, task_id, status, reward, success, grading_basis, "
                                               "metrics['exact'], termination FROM {T} ORDER BY method, task_id")
    assert episodes == [(m, t, "completed", 1.0, True, "exact match", 1.0, "requests_done")
                        for m in ("flowstate-json", "last_n") for t in ("t1", "t2")]
    # every request graded on its own: t1 has 2, t2 has 3
    assert rows(plugin_sweep, "request_outcomes", "SELECT count(*), bool_and(correct), sum(credit_passed) FROM {T}") == [
        (10, True, 10)]
    # the benchmark ends even requests through a tool (submit), odd ones by a message
    steps = rows(plugin_sweep, "steps", "SELECT request, string_agg(coalesce(assistant_message, "
                                        "list_extract(tool_calls, 1).name), ',' ORDER BY step) FROM {T} "
                                        "WHERE method = 'last_n' AND task_id = 't2' GROUP BY request ORDER BY request")
    assert steps == [(1, "lookup,tac"), (2, "lookup,submit"), (3, "lookup,lwo")]
    manifest = json.loads((plugin_sweep / "manifest.json").read_text())
    assert manifest["job"]["plugins"] == ["examples.tiny", "examples.last_n"]
    assert manifest["prompt_templates_sha256"] == prompt_templates_hash() and len(prompt_templates_hash()) == 64


def test_the_method_records_what_it_declared(plugin_sweep: Path) -> None:
    records = rows(plugin_sweep, "method_records", "SELECT kind, request, payload_json FROM {T} "
                                                   "WHERE task_id = 't2' ORDER BY seq")
    assert {r[0] for r in records} == {"retrieval", "window"}
    retrievals = [(r[1], json.loads(r[2])) for r in records if r[0] == "retrieval"]
    # the benchmark's memory query, and its entries stored at the end of each request
    assert retrievals == [(1, {"query": "recall: Spell cat backwards.", "entries": 0}),
                          (2, {"query": "recall: Spell dog backwards.", "entries": 1}),
                          (3, {"query": "recall: Spell owl backwards.", "entries": 2})]
    windows = [json.loads(r[2]) for r in records if r[0] == "window"]
    assert max(w["kept"] for w in windows) == 2 and max(w["dropped"] for w in windows) > 0
    assert rows(plugin_sweep, "method_records", "SELECT DISTINCT method FROM {T}") == [("last_n",)]
    # what last_n showed the model: the stored entries, in its own template
    prompt = rows(plugin_sweep, "messages", "SELECT prompt_json FROM {T} WHERE method = 'last_n' AND task_id = 't2' "
                                            "AND request = 3 AND step = 1")[0][0]
    assert "Q1: Spell cat backwards. -> tac\\nQ2: Spell dog backwards. -> god" in prompt


def test_sql_report_and_mlflow_show_the_plugins(plugin_sweep: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["query", "scores", "--runs", str(plugin_sweep), "--format", "json"]) == 0
    scores = {(r["method"], r["metric"]): r["value"] for r in json.loads(capsys.readouterr().out)}
    assert scores == {(m, metric): 1.0 for m in ("flowstate-json", "last_n") for metric in ("exact", "micro", "pass_rate")}
    assert main(["query", "depth_accuracy", "--runs", str(plugin_sweep), "--format", "json"]) == 0
    depth = json.loads(capsys.readouterr().out)
    assert {(r["method"], r["k"], r["instances"], r["acc_k"]) for r in depth} == {
        (m, k, n, 100.0) for m in ("flowstate-json", "last_n") for k, n in ((1, 2), (2, 2), (3, 1))}

    out = tmp_path / "report.md"
    assert main(["report", str(plugin_sweep), "--out", str(out)]) == 0
    text = out.read_text()
    assert "## Tiny results" in text and "EM = mean share" in text and "baseline: `last_n`" in text
    header = next(line for line in text.splitlines() if line.startswith("| Model | Method | Lookup EM"))
    assert header == "| Model | Method | Lookup EM | Lookup Micro | Lookup #Tok |"
    assert "| oracle | Δ flowstate-json vs. last_n | +0.0 | +0.0 | – |" in text
    assert "## Table 4: depth retention" in text and (tmp_path / "report_fig4_depth.png").is_file()

    manifest = json.loads((plugin_sweep / "manifest.json").read_text())
    client = MlflowClient()
    experiment = client.get_experiment_by_name("flowstate-plugins")
    cells = client.search_runs([experiment.experiment_id], f"tags.`mlflow.parentRunId` = '{manifest['mlflow_run_id']}'")
    by_method = {r.data.tags["method"]: r.data.metrics for r in cells}
    assert set(by_method) == {"flowstate-json", "last_n"}
    assert by_method["last_n"]["exact"] == by_method["last_n"]["micro"] == 1.0
    assert by_method["flowstate-json"]["vs_baseline.d_exact"] == 0.0
    assert by_method["last_n"]["depth.nauc"] == 100.0


def test_readers_take_a_plugin_benchmark_from_the_manifest_not_its_module(plugin_sweep: Path, tmp_path: Path) -> None:
    """In a fresh process (where the plug-in is importable but nothing imported it), the report has
    the plug-in's own layout, from the catalog the manifest stored, and the module stays unimported."""
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT

    out = tmp_path / "report.md"
    script = ("import sys; from pipeline.cli.main import main; "
              f"code = main(['report', {str(plugin_sweep)!r}, '--out', {str(out)!r}]); "
              "sys.exit(3 if {'examples.tiny', 'examples.last_n'} & set(sys.modules) else code)")
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "## Tiny results" in text and "| Model | Method | Lookup EM | Lookup Micro | Lookup #Tok |" in text


def test_regrading_rewrites_the_request_outcomes(plugin_sweep: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    sweep = tmp_path / plugin_sweep.name
    shutil.copytree(plugin_sweep, sweep)
    for path in (sweep / "request_outcomes").glob("*/*.parquet"):
        path.unlink()  # as if an older version had written none
    # the plug-ins named on the command line, never imported from the manifest
    assert main(["grade", str(sweep), "--plugin", "examples.tiny", "--plugin", "examples.last_n"]) == 0
    assert "graded 4 episodes (0 changed, 0 ungraded), mean reward 1.0000" in capsys.readouterr().out
    assert rows(sweep, "request_outcomes", "SELECT count(*), bool_and(correct) FROM {T}") == [(10, True)]


def test_plugin_options_are_validated_by_the_plugins_own_model(tmp_path: Path) -> None:
    job = {**JOB, "methods": [{"name": "last_n", "windw": 2}]}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(job))
    with pytest.raises(ConfigError, match=r"bad.yaml:\d+: unknown key 'methods.0.windw'"):
        load_job(tmp_path / "bad.yaml")
    job = {**JOB, "plugins": ["tests.plugins.nothing_here"]}
    (tmp_path / "missing.yaml").write_text(yaml.safe_dump(job))
    with pytest.raises(ValueError, match="plug-in module 'tests.plugins.nothing_here'"):
        load_job(tmp_path / "missing.yaml")


def test_a_methods_own_model_and_embeddings_are_recorded_and_counted(ray_local, tmp_path: Path) -> None:
    """The recall method writes with the memory role and retrieves with the embeddings role, both on a
    real OpenAI-compatible server on 127.0.0.1 (the stand-in): every call lands in the messages table
    under its role, the method's own tokens count in #Tok on the steps they belong to, embeddings beside."""
    from pipeline.llm.kinds.replica_sim.server import StubServer

    with StubServer() as stub:
        job = {**JOB, "name": "recall", "methods": [{"name": "recall"}], "analysis": {},
               "memory": {"deployment": "stub", "sampling": {"temperature": 0.0, "max_tokens": 64}},
               "embeddings": {"deployment": "stub"},
               "deployments": {**JOB["deployments"], "stub": {"kind": "endpoint", "base_url": stub.url, "model": "stub"}}}
        (tmp_path / "recall.yaml").write_text(yaml.safe_dump(job))
        assert main(["run", str(tmp_path / "recall.yaml"), "--out", str(tmp_path / "runs")]) == 0
    [sweep] = [d for d in (tmp_path / "runs").iterdir() if d.is_dir()]
    calls = rows(sweep, "messages", "SELECT caller, count(*), count(request), sum(prompt_tokens) FROM {T} "
                                    "WHERE task_id = 't2' GROUP BY caller ORDER BY caller")
    # t2: 3 requests, 2 agent steps each; one note per request; one embedding per note, one per later query
    assert [(c, n, positioned) for c, n, positioned, _ in calls] == [("agent", 6, 6), ("embeddings", 5, 5),
                                                                     ("memory", 3, 3)]
    memory_tokens = {c: tokens for c, _, _, tokens in calls}["memory"]
    per_step = rows(sweep, "steps", "SELECT request, step, memory_calls, memory_prompt_tokens FROM {T} "
                                    "WHERE task_id = 't2' ORDER BY request, step")
    assert [(r, s, n) for r, s, n, _ in per_step] == [(k, t, int(t == 2)) for k in (1, 2, 3) for t in (1, 2)]
    assert sum(t or 0 for *_, t in per_step) == memory_tokens
    [(tokens, agent, memory_prompt, memory_completion, embeddings)] = rows(
        sweep, "episodes", "SELECT tokens, agent_prompt_tokens, memory_prompt_tokens, memory_completion_tokens, "
                           "embeddings_tokens FROM {T} WHERE task_id = 't2'")
    assert agent is None and memory_prompt == memory_tokens  # the scripted agent reports no tokens
    assert tokens == memory_prompt + memory_completion and embeddings > 0  # #Tok: agent + memory, never embeddings
    retrievals = rows(sweep, "method_records", "SELECT request, payload_json->>'$.ids' FROM {T} "
                                               "WHERE task_id = 't2' AND kind = 'retrieval' ORDER BY request")
    assert [r for r, _ in retrievals] == [2, 3]
    prompt = rows(sweep, "messages", "SELECT prompt_json FROM {T} WHERE caller = 'memory' AND task_id = 't1' "
                                     "AND request = 1")[0][0]
    assert "note: Q1: What is the capital of France? -> Paris" in prompt  # the benchmark's entry


def test_show_prints_a_plugin_episode(plugin_sweep: Path, capsys: pytest.CaptureFixture[str]) -> None:
    [(episode,)] = rows(plugin_sweep, "episodes", "SELECT episode_id FROM {T} WHERE method = 'last_n' AND task_id = 't2'")
    assert main(["show", episode[:10], "--runs", str(plugin_sweep)]) == 0
    out = capsys.readouterr().out
    assert "(exact match; correct 3, exact 1, requests 3)" in out
    assert "requests graded: 1✓ 2✓ 3✓ (3/3 correct)" in out and "method records: 3 retrieval, 6 window" in out


def test_the_installed_plug_ins_are_listed_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    from flowstate import registry

    listed: list[dict[str, str]] = []
    monkeypatch.setattr(registry, "_discovered", False)
    monkeypatch.setattr(registry.metadata, "entry_points", lambda **query: listed.append(query) or [])
    registry.discover_plugins()
    load_plugins()  # an episode actor's preload, after its imports loaded them
    assert listed == [{"group": registry.ENTRY_POINT_GROUP}]
