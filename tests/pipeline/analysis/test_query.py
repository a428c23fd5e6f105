"""The query runner: names and files, parameters, several sweeps, schema changes, unfinished episodes."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from pipeline.analysis.query import QueryError, list_queries, load_query, run_query
from pipeline.store.files import NoResultsError
from pipeline.store.writer import write_parquet_atomic
from tests.pipeline.analysis.builder import SweepBuilder, table_of
from tests.pipeline.analysis.conftest import build_scores_sweep


def test_every_shipped_query_documents_itself() -> None:
    names = list_queries()
    assert {"pass_rate", "pass_hat_k", "tokens", "delta_vs_baseline", "scores", "depth_retention", "latency"} <= set(names)
    for name in names:
        spec = load_query(name)
        assert spec.description, f"{name}.sql has no header comment"
        assert spec.sql.startswith(f"-- {name}:"), f"{name}.sql should open with '-- {name}: <question>'"


def test_unknown_query_lists_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(QueryError, match=r"unknown query 'nope'.*pass_rate.*tokens"):
        run_query("nope", tmp_path)


def test_missing_and_unknown_parameters(scores_sweep: SweepBuilder, tmp_path: Path) -> None:
    own = tmp_path / "mine.sql"
    own.write_text("-- mine: episodes of one task\nSELECT count(*) AS n FROM episodes WHERE task_id = $task\n")
    with pytest.raises(QueryError, match=r"needs parameter task \(--param task=VALUE\)"):
        run_query(own, scores_sweep.sweep_dir)
    with pytest.raises(QueryError, match="has no parameter colour"):
        run_query("pass_rate", scores_sweep.sweep_dir, {"colour": "red"})
    with pytest.raises(QueryError, match="max_depth must be INTEGER"):
        run_query("depth_accuracy", scores_sweep.sweep_dir, {"max_depth": "deep"})


def test_own_sql_file_with_bound_parameters(scores_sweep: SweepBuilder, tmp_path: Path) -> None:
    own = tmp_path / "mine.sql"
    own.write_text("-- mine: episodes of one task\n-- @param task VARCHAR -- the task id\n"
                   "SELECT count(*) AS n FROM episodes WHERE task_id = $task\n")
    assert run_query(str(own), scores_sweep.sweep_dir, {"task": "C"}).to_pylist() == [{"n": 3}]
    # a value is a value, never SQL
    assert run_query(str(own), scores_sweep.sweep_dir, {"task": "C' OR '1'='1"}).to_pylist() == [{"n": 0}]


def test_runs_dir_of_several_sweeps(tmp_path: Path) -> None:
    build_scores_sweep(tmp_path, "sweep-a")
    build_scores_sweep(tmp_path, "sweep-b")
    (tmp_path / "sweep-a.replaced-20260101T000000").mkdir()  # moved aside by --fresh: not a sweep
    (tmp_path / "sweep-a.replaced-20260101T000000" / "manifest.json").write_text("{}")
    one = {r["method"]: r for r in run_query("pass_rate", tmp_path / "sweep-a").to_pylist()}
    both = {r["method"]: r for r in run_query("pass_rate", tmp_path).to_pylist()}
    assert both["full_context"]["episodes"] == 2 * one["full_context"]["episodes"]
    assert both["full_context"]["pass_rate"] == pytest.approx(one["full_context"]["pass_rate"])


def test_directory_without_results(tmp_path: Path) -> None:
    with pytest.raises(NoResultsError, match="no such directory"):
        run_query("pass_rate", tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(NoResultsError, match="no FlowState results here"):
        run_query("pass_rate", tmp_path / "empty")
    (tmp_path / "started" / "steps").mkdir(parents=True)
    with pytest.raises(NoResultsError, match="no finished episodes yet"):
        run_query("pass_rate", tmp_path / "started")


def test_columns_added_or_missing_across_files(tmp_path: Path) -> None:
    b = SweepBuilder(tmp_path)
    b.episode(task="A", steps=[{"request": 1, "step": 1, "n_proposed_ops": 2}])
    ids = b.ids(domain="airline", method="full_context", model="m1", task="C", trial=0)
    later = table_of("steps", [{**ids, "request": 1, "step": 1, "n_proposed_ops": 1}])
    write_parquet_atomic(b.sweep_dir / "steps" / f"cell={ids['cell_id']}" / f"{ids['episode_id']}.parquet",
                         later.append_column("grader_notes", pa.array(["from a later schema"])), [ids["episode_id"]])
    b.episode(task="C")
    ids_b = b.ids(domain="airline", method="full_context", model="m1", task="B", trial=0)
    older = table_of("episodes", [{**ids_b, "status": "completed", "reward": 0.0, "success": False, "graded": True}])
    write_parquet_atomic(b.sweep_dir / "episodes" / f"cell={ids_b['cell_id']}" / f"{ids_b['episode_id']}.parquet",
                         older.drop_columns(["judge_prompt_tokens", "n_requests"]), [ids_b["episode_id"]])  # older columns
    [r] = run_query("pass_rate", b.sweep_dir).to_pylist()
    assert (r["episodes"], r["pass_rate"]) == (3, pytest.approx(2 / 3))
    [t] = run_query("tokens", b.sweep_dir).to_pylist()
    assert t["judge_tokens"] is None
    own = tmp_path / "notes.sql"
    own.write_text("-- notes\nSELECT count(grader_notes) AS n, count(*) AS steps, sum(n_proposed_ops) AS ops FROM steps\n")
    assert run_query(str(own), b.sweep_dir).to_pylist() == [{"n": 1, "steps": 2, "ops": 3}]


def test_rows_of_unfinished_episodes_are_not_seen(tmp_path: Path) -> None:
    b = SweepBuilder(tmp_path)
    b.episode(task="A", steps=[{"request": 1, "step": 1, "n_proposed_ops": 1}])
    b.episode(task="B", steps=[{"request": 1, "step": 1, "n_proposed_ops": 5}], write_episode_row=False)  # crashed
    [r] = run_query("isu_ops", b.sweep_dir).to_pylist()
    assert (r["steps"], r["proposed"]) == (1, 1)


def test_messages_written_before_served_model_was_named(tmp_path: Path) -> None:
    """Schema v1 called the answering model a second "model" column; call_model reads either."""
    b = SweepBuilder(tmp_path)
    new = b.episode(task="A", messages=[{"seq": 0, "caller": "user_simulator", "latency_s": 1.0, "served_model": "u-new"}])
    ids = b.ids(domain="airline", method="full_context", model="m1", task="B", trial=0)
    old = table_of("messages", [{**ids, "seq": 0, "caller": "user_simulator", "latency_s": 3.0}])
    old = old.drop_columns(["served_model"])
    old = pa.Table.from_arrays([*old.columns, pa.array(["u-old"])], names=[*old.column_names, "model"])
    write_parquet_atomic(b.sweep_dir / "messages" / f"cell={ids['cell_id']}" / f"{ids['episode_id']}.parquet", old,
                         [ids["episode_id"]])
    b.episode(task="B")
    latency = {r["model"]: r for r in run_query("latency", b.sweep_dir).to_pylist()}
    assert set(latency) == {"u-new", "u-old"}
    assert (latency["u-old"]["p50_s"], new["model"]) == (3.0, "m1")
