"""The analysis subcommands on the main parser (with the benchmarks' own exports)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from flowstate import FlowStateError
from pipeline.cli.main import build_parser
from tests.pipeline.analysis.builder import SweepBuilder


def run(*argv: str) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


def test_query_as_csv_json_and_parquet(scores_sweep: SweepBuilder, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    runs = str(scores_sweep.sweep_dir)
    assert run("query", "pass_hat_k", "--runs", runs, "--format", "csv") == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {(r["method"], r["k"]) for r in rows} >= {("full_context", "3"), ("flowstate", "1")}
    assert run("query", "delta_vs_baseline", "--runs", runs, "--param", "baseline=flowstate", "--format", "json") == 0
    deltas = json.loads(capsys.readouterr().out)
    assert {(d["method"], d["baseline"]) for d in deltas} == {("full_context", "flowstate")}
    assert [d["metric"] for d in deltas] == ["pass_rate", "db", "action", "tokens"]  # τ-bench's headline metrics
    assert run("query", "delta_vs_baseline", "--runs", runs, "--format", "json") == 0  # the job's baseline
    assert {d["baseline"] for d in json.loads(capsys.readouterr().out)} == {"full_context"}
    out = tmp_path / "tokens.parquet"
    assert run("query", "tokens", "--runs", runs, "--format", "parquet", "--out", str(out)) == 0
    assert pq.read_table(out).num_rows == 2
    assert run("query", "pass_rate", "--runs", runs) == 0
    assert "full_context" in capsys.readouterr().out


def test_user_errors_are_flowstate_errors(scores_sweep: SweepBuilder, tmp_path: Path) -> None:
    runs = str(scores_sweep.sweep_dir)
    with pytest.raises(FlowStateError, match="known queries"):
        run("query", "nope", "--runs", runs)
    with pytest.raises(FlowStateError, match="KEY=VALUE"):
        run("query", "pass_rate", "--runs", runs, "--param", "baseline")
    with pytest.raises(FlowStateError, match="needs parameter"):
        (tmp_path / "q.sql").write_text("SELECT $x AS x\n")
        run("query", str(tmp_path / "q.sql"), "--runs", runs)
    with pytest.raises(FlowStateError, match="no FlowState results"):
        run("report", str(tmp_path))
    with pytest.raises(FlowStateError, match="writes a file"):
        run("query", "pass_rate", "--runs", runs, "--format", "parquet")


def test_compact_report_and_export(scores_sweep: SweepBuilder, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("compact", str(scores_sweep.root)) == 0
    assert "parts" in capsys.readouterr().out
    assert run("report", str(scores_sweep.sweep_dir), "--out", str(tmp_path / "r.md")) == 0
    assert (tmp_path / "r.md").read_text().startswith("# FlowState results")
    capsys.readouterr()
    assert run("export", "tau2", str(scores_sweep.sweep_dir), "--out", str(tmp_path / "x.json")) == 0
    assert capsys.readouterr().out.count("wrote ") == 2  # one results file per cell
    SweepBuilder(tmp_path / "failed").episode(task="1", status="failed", reward=None)
    with pytest.raises(FlowStateError, match="no scored τ-bench episodes"):
        run("export", "tau2", str(tmp_path / "failed"), "--out", str(tmp_path / "y.json"))


def test_an_unknown_metric_is_an_error_that_lists_the_metrics_and_an_empty_result_says_so(
        scores_sweep: SweepBuilder, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = str(scores_sweep.sweep_dir)
    with pytest.raises(FlowStateError, match=r"no metric 'sr' in these results; the metrics there are: action, "
                                             r"action_read, .*db, .*pass_rate"):
        run("query", "scores", "--runs", runs, "--param", "metric=sr")  # MemoryArena's, not τ-bench's
    b = SweepBuilder(tmp_path / "unscored")  # one episode, an infrastructure failure: nothing scored
    b.episode(status="failed", reward=None, termination="infrastructure_error")
    b.manifest()
    capsys.readouterr()
    assert run("query", "scores", "--runs", str(b.sweep_dir), "--param", "metric=db", "--format", "json") == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == [] and err == f"scores: no rows over {b.sweep_dir}\n"


def test_a_querys_sums_are_json_numbers(scores_sweep: SweepBuilder, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A sum of integers is a HUGEINT in DuckDB, a decimal in Arrow: it was written "accepted_ops": "0"."""
    query = tmp_path / "ops.sql"
    query.write_text("SELECT method, sum(len(accepted_ops)) AS accepted_ops, sum(latency_s) AS latency_s "
                     "FROM steps GROUP BY method\n")
    assert run("query", str(query), "--runs", str(scores_sweep.sweep_dir), "--format", "json") == 0
    assert json.loads(capsys.readouterr().out) == [{"method": "flowstate", "accepted_ops": 3, "latency_s": 10.0}]
