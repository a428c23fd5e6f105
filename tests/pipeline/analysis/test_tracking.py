"""MLflow tracking, read back through MLflow's own API against a sqlite store in a temporary folder."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import mlflow
import pytest
from mlflow import MlflowClient

from pipeline.analysis.query import connect
from pipeline.tracking import mlflow_runs as runs
from pipeline.tracking.mlflow_log import CELL_TAG, PARENT_TAG, SWEEP_TAG, TrackingResult, log_sweep
from pipeline.tracking.traces import EPISODE_TAG, episode_rows, episode_trace, write_traces
from tests.pipeline.analysis.builder import T0, SweepBuilder
from tests.pipeline.analysis.conftest import build_scores_sweep

EXPERIMENT = "flowstate-test"


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("tracking")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    builder = build_scores_sweep(root / "runs")
    (builder.root / "job.yaml").write_text("name: test-job\n")
    builder.write("faults", builder.ids(domain="airline", method="flowstate", model="m1", task="A", trial=0), [
        {"seq": 0, "episode_attempt": 0, "caller": "agent", "request": 0, "step": 0, "deployment": "m1",
         "kind": "timeout", "http_status": None, "attempt": 0, "retried": True, "latency_s": 1.0, "message": "slow"}])
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)  # MLflow's default artifact root is relative to the working directory
        before = (os.environ.get("MLFLOW_TRACKING_URI"), mlflow.get_tracking_uri())
        first = log_sweep(builder.sweep_dir, experiment=EXPERIMENT, tracking_uri=uri)
        second = log_sweep(builder.sweep_dir, experiment=EXPERIMENT, tracking_uri=uri)
        after = (os.environ.get("MLFLOW_TRACKING_URI"), mlflow.get_tracking_uri())
        mp.setenv("MLFLOW_TRACKING_URI", uri)  # for mlflow.search_* below; put back afterwards
        yield {"first": first, "second": second, "uri": uri, "builder": builder, "root": root,
               "client": MlflowClient(uri), "before": before, "after": after}


def test_an_explicit_uri_leaves_the_callers_store_alone(logged: dict[str, Any]) -> None:
    assert logged["after"] == logged["before"] and logged["before"][1] != logged["uri"]


def _runs(uri: str) -> list[Any]:
    return mlflow.search_runs(experiment_names=[EXPERIMENT], output_format="list")


def test_parent_and_child_runs(logged: dict[str, Any]) -> None:
    first: TrackingResult = logged["first"]
    runs = _runs(logged["uri"])
    parents = [r for r in runs if PARENT_TAG not in r.data.tags]
    children = [r for r in runs if r.data.tags.get(PARENT_TAG) == first.parent_run_id]
    assert [p.info.run_id for p in parents] == [first.parent_run_id]
    assert len(children) == 2 == len(first.child_run_ids)
    fs = next(c for c in children if c.data.tags["method"] == "flowstate")
    assert (fs.data.tags["benchmark"], fs.data.tags["domain"], fs.data.tags["model"]) == ("taubench", "airline", "m1")
    assert fs.info.run_name == "flowstate · airline · m1"  # method first, short: the run list cuts long names
    assert fs.data.params["label"] == "taubench.airline.flowstate.m1"  # the cell's label, as in Parquet
    assert first.child_run_ids[fs.data.tags[CELL_TAG]] == fs.info.run_id


def test_parent_params_tags_and_manifest(logged: dict[str, Any]) -> None:
    parent = logged["client"].get_run(logged["first"].parent_run_id)
    params = parent.data.params
    assert (params["job_name"], params["sweep_id"], params["code_version"]) == ("test-job", "sweep-a", "abc123")
    assert params["versions.duckdb"] == "2.0"
    assert params["deployment.m1.engine"] == "scripted"
    assert parent.data.tags[SWEEP_TAG] == "sweep-a"
    assert parent.data.tags["flowstate.parquet_path"] == str(logged["builder"].sweep_dir.resolve())
    manifest = json.loads((logged["builder"].sweep_dir / "manifest.json").read_text())
    assert manifest["mlflow_run_id"] == logged["first"].parent_run_id


def test_child_metrics_come_from_the_sql(logged: dict[str, Any]) -> None:
    client: MlflowClient = logged["client"]
    by_method = {client.get_run(r).data.tags["method"]: client.get_run(r).data.metrics
                 for r in logged["first"].child_run_ids.values()}
    fc, fs = by_method["full_context"], by_method["flowstate"]
    assert fc["pass_rate"] == pytest.approx(5 / 9)
    assert fc["pass_hat_2"] == pytest.approx(4 / 9)
    assert fc["tokens.tokens"] == 9900
    assert fs["vs_baseline.d_pass_rate"] == pytest.approx(100 / 3)
    assert fs["isu.acceptance_rate"] == pytest.approx(0.5)
    assert fs["psa.mean_distance"] == pytest.approx((1 + 1 + 1 + 2) / 4)
    run_id = logged["first"].child_run_ids[next(iter(logged["first"].child_run_ids))]
    assert client.get_metric_history(run_id, "pass_rate")[0].step in (7, 9)  # finished episodes of the cell


HEADLINE = ["1 PR", "1 PR Δ pp", "2 DB", "2 DB Δ pp", "3 Act.", "3 Act. Δ pp", "4 Tok", "4 Tok Δ pct"]


def _child(logged: dict[str, Any], method: str) -> Any:
    client: MlflowClient = logged["client"]
    return next(r for r in map(client.get_run, logged["first"].child_run_ids.values()) if r.data.tags["method"] == method)


def test_each_cell_runs_its_benchmark_and_domain_as_a_dataset(logged: dict[str, Any]) -> None:
    for method in ("flowstate", "full_context"):  # logged twice: one input each
        inputs = _child(logged, method).inputs.dataset_inputs
        assert [(d.dataset.name, d.dataset.source_type) for d in inputs] == [("taubench/airline", "flowstate")]
        assert json.loads(inputs[0].dataset.source) == {"benchmark": "taubench", "domain": "airline"}
    assert _child(logged, "flowstate").inputs.dataset_inputs[0].dataset.digest == \
        _child(logged, "full_context").inputs.dataset_inputs[0].dataset.digest


def test_headline_metrics_sort_first_rounded_as_the_paper_prints_them(logged: dict[str, Any]) -> None:
    fs, fc = _child(logged, "flowstate").data.metrics, _child(logged, "full_context").data.metrics
    assert sorted(fs)[:len(HEADLINE)] == HEADLINE == sorted(fc)[:len(HEADLINE)]  # before every other, live.* too
    assert fc["1 PR"] == 55.6 and fc["pass_rate"] == pytest.approx(5 / 9)  # percent, one decimal; the exact one kept
    assert fs["1 PR Δ pp"] == 33.3 and fs["vs_baseline.d_pass_rate"] == pytest.approx(100 / 3)
    assert fc["4 Tok"] == 9900 and fc["1 PR Δ pp"] == fc["4 Tok Δ pct"] == 0.0  # the baseline against itself
    tokens = fs["vs_baseline.tokens_per_episode"] / fs["vs_baseline.baseline_tokens_per_episode"]
    assert fs["4 Tok Δ pct"] == round(100 * (tokens - 1), 2)


def test_a_cell_without_faults_has_zero_faults_not_none(logged: dict[str, Any]) -> None:
    fs, fc = _child(logged, "flowstate").data.metrics, _child(logged, "full_context").data.metrics
    assert (fs["faults.total"], fs["faults.timeout"]) == (1, 1)
    assert (fc["faults.total"], fc["faults.timeout"]) == (0, 0)


def test_the_parents_description_holds_the_headline_table(logged: dict[str, Any]) -> None:
    note = logged["client"].get_run(logged["first"].parent_run_id).data.tags["mlflow.note.content"]
    lines = note.splitlines()
    assert "| Method | Domain | Model | PR (Δ) | DB (Δ) | Act. (Δ) | Tok (Δ) | Episodes |" in lines
    assert any(line.startswith("| full_context (baseline) | airline | m1 | 55.6 | ") for line in lines)
    assert any(line.startswith("| flowstate | airline | m1 | 66.7 (+33.3) | ") for line in lines)
    # the paper's published figures beside the sweep's, per cell, labelled with the paper's model
    paper = lines[lines.index("## The paper beside this sweep"):]
    assert any("paper, DeepSeek-V4-Flash" in line for line in paper)
    assert any(line.startswith("| airline | m1 | flowstate | PR | 66.7 | ") for line in paper)


def test_relogging_renames_a_run_an_older_version_named(logged: dict[str, Any]) -> None:
    client: MlflowClient = logged["client"]
    run_id = _child(logged, "flowstate").info.run_id
    client.update_run(run_id, name="taubench.airline.flowstate.m1")  # as flowstate named it before
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(logged["root"])
        again = log_sweep(logged["builder"].sweep_dir, experiment=EXPERIMENT, tracking_uri=logged["uri"])
    assert run_id in again.child_run_ids.values()
    assert client.get_run(run_id).info.run_name == "flowstate · airline · m1"
    assert len(client.get_run(run_id).inputs.dataset_inputs) == 1


def test_artifacts(logged: dict[str, Any]) -> None:
    client: MlflowClient = logged["client"]
    parent = logged["first"].parent_run_id
    listed = {f.path for folder in ("config", "summary", "report") for f in client.list_artifacts(parent, folder)}
    assert {"config/resolved_job.json", "config/manifest.json", "config/job.yaml"} <= listed
    assert {"summary/pass_rate.md", "summary/pass_rate.csv", "summary/tokens.csv"} <= listed
    assert "report/report.md" in listed and any(p.endswith(".png") for p in listed)
    local = Path(client.download_artifacts(parent, "summary/pass_rate.csv", str(logged["root"])))
    assert "full_context" in local.read_text()


def test_traces_hold_one_span_per_step(logged: dict[str, Any]) -> None:
    first: TrackingResult = logged["first"]
    assert first.traces_logged == 6  # 3 samples in each cell
    total = 0
    for run_id in first.child_run_ids.values():
        traces = mlflow.search_traces(locations=[first.experiment_id], run_id=run_id, return_type="list")
        total += len(traces)
        for trace in traces:
            if trace.info.tags.get("flowstate.episode_id") == logged["builder"].ids(
                    domain="airline", method="flowstate", model="m1", task="A", trial=0)["episode_id"]:
                names = [s.name for s in trace.data.spans]
                assert sum(n.startswith("request ") for n in names) == 4  # the episode's 4 steps
                assert names.count("model call") == 4 and names.count("ISU") == 3  # step 4 proposed nothing
                assert names.count("PSA") == 2 and "get_user_details" in names
                llm = next(s for s in trace.data.spans if s.name == "model call")
                assert llm.inputs == {"messages": [{"role": "user", "content": "hi"}]}
                assert llm.outputs == {"completion": "completion 0"}
    assert total == 6


def test_relogging_duplicates_nothing(logged: dict[str, Any]) -> None:
    first, second = logged["first"], logged["second"]
    assert second.parent_run_id == first.parent_run_id
    assert second.child_run_ids == first.child_run_ids
    assert (second.metrics_logged, second.traces_logged) == (0, 0)
    assert len(_runs(logged["uri"])) == 3
    client: MlflowClient = logged["client"]
    for run_id in first.child_run_ids.values():
        assert len(client.get_metric_history(run_id, "pass_rate")) == 1


def test_relogging_after_more_episodes_updates_metrics(logged: dict[str, Any]) -> None:
    builder: SweepBuilder = logged["builder"]
    builder.episode(method="full_context", task="D", trial=0, reward=0.0, db=0.0, graded=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(logged["root"])
        third = log_sweep(builder.sweep_dir, experiment=EXPERIMENT, tracking_uri=logged["uri"])
    assert third.child_run_ids == logged["first"].child_run_ids
    fc_run = next(r for r in third.child_run_ids.values()
                  if logged["client"].get_run(r).data.tags["method"] == "full_context")
    history = logged["client"].get_metric_history(fc_run, "pass_rate")
    assert [round(m.value, 6) for m in sorted(history, key=lambda m: m.step)] == [round(5 / 9, 6), round(5 / 10, 6)]
    assert len(_runs(logged["uri"])) == 3
    assert third.traces_logged == 0  # already 3 samples in each cell


ENDS = "flowstate-test-ends"  # an experiment of their own: the tests above count the runs of theirs


def _sweep_run(client: MlflowClient, sweep_id: str, status: str) -> str:
    """The sweep's parent as an earlier driver left it."""
    experiment = client.get_experiment_by_name(ENDS) or client.get_experiment(client.create_experiment(ENDS))
    run = runs.new_parent(client, experiment.experiment_id, sweep_id, None)
    if status != "RUNNING":
        client.set_terminated(run.info.run_id, status)
    return run.info.run_id


@pytest.mark.parametrize(("left", "complete", "ends"), [
    (None, True, "FINISHED"),  # logged after the fact
    ("RUNNING", True, "FINISHED"),  # the end of a live sweep
    ("RUNNING", False, "KILLED"),  # a driver that died half-way
    ("KILLED", False, "KILLED"),  # a stopped sweep keeps what happened to it ...
    ("FAILED", False, "FAILED"),
    ("KILLED", True, "FINISHED"),  # ... until every episode has a row
])
def test_the_runs_end_as_the_sweep_did(logged: dict[str, Any], tmp_path: Path, left: str | None, complete: bool,
                                       ends: str) -> None:
    client: MlflowClient = logged["client"]
    sweep_id = f"sweep-{left}-{complete}".lower()
    builder = build_scores_sweep(tmp_path / "runs", sweep_id=sweep_id)
    started, finished = T0 + timedelta(minutes=5), T0 + timedelta(hours=3)
    builder.manifest(episodes=len(builder.written) + (0 if complete else 5),
                     runs=[{"started_at": started.isoformat(), "finished_at": finished.isoformat()}])
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(logged["root"])
        known = _sweep_run(client, sweep_id, left) if left else None
        result = log_sweep(builder.sweep_dir, experiment=ENDS, tracking_uri=logged["uri"])
    parent = client.get_run(result.parent_run_id)
    assert result.parent_run_id == (known or parent.info.run_id) and result.status == parent.info.status == ends
    assert {client.get_run(r).info.status for r in result.child_run_ids.values()} == {ends}
    if left is None:  # made after the fact: it spans the recorded runs
        assert (parent.info.start_time, parent.info.end_time) == (int(started.timestamp() * 1000),
                                                                  int(finished.timestamp() * 1000))


def test_a_trace_written_again_is_overwritten_not_doubled(logged: dict[str, Any]) -> None:
    first: TrackingResult = logged["first"]
    client: MlflowClient = logged["client"]
    builder: SweepBuilder = logged["builder"]
    run_id = next(iter(first.child_run_ids.values()))
    before = client.search_traces(locations=[first.experiment_id], run_id=run_id, include_spans=True)
    trace = before[0]
    with connect(builder.sweep_dir) as con:
        episode = con.sql("SELECT * FROM finished WHERE episode_id = $e",
                          params={"e": trace.info.tags[EPISODE_TAG]}).to_arrow_table().to_pylist()[0]
        rows = episode_rows(con, [episode["episode_id"]])
    again = episode_trace(episode, rows[episode["episode_id"]], run_id=run_id, tags={SWEEP_TAG: builder.sweep_id})
    assert again.trace_id == trace.info.trace_id
    other = episode_trace(episode, rows[episode["episode_id"]], run_id="another-run", tags={})
    assert other.trace_id != trace.info.trace_id  # the episode logged by another sweep or to another experiment
    write_traces(client, first.experiment_id, [again])
    after = client.search_traces(locations=[first.experiment_id], run_id=run_id, include_spans=True)
    assert len(after) == len(before)
    rewritten = next(t for t in after if t.info.trace_id == trace.info.trace_id)
    assert [s.name for s in rewritten.data.spans] == [s.name for s in trace.data.spans]
    assert rewritten.info.tags[CELL_TAG] == trace.info.tags[CELL_TAG] and rewritten.info.request_preview
