"""What a sweep's results are, however it got there: to compare a sweep that was interrupted and
resumed (a crash, a full disk) with one of the same job that ran straight through.

Read as a user would read them: the visible rows (:mod:`pipeline.store.files`) and the MLflow runs
through MLflow's API. What depends on when or how fast a run went (timings, the ``live.*`` tallies
of the last run) or on which replica served each call (the prefix-cache figures) is left out;
everything else must be equal. A sweep that lost a replica mid-call also recorded the calls that
failed there: :func:`without_faults` sets that record aside.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
from pydantic import BaseModel

from pipeline.store.files import table_files
from pipeline.store.manifest import read_manifest
from pipeline.tracking import mlflow_runs as runs
from pipeline.tracking.traces import CELL_TAG

# tokens.sql's prefix-cache figures: what the replica that served each call had cached. Ties
# between replicas are broken at random (the cached shares of two runs of one job differ) and a
# dead replica's conversations move (their reusable prefixes and physical limits too); the
# results do not.
CACHE_METRICS = frozenset(f"tokens.{name}" for name in (
    "cached_share", "cached_share_estimate", "cached_share_of_limit", "uncached_prompt_tokens",
    "reusable_prefix_tokens", "physical_limit_tokens"))


def incidental(metric: str) -> bool:
    """A metric of how a run went, not of its results: one that measures time, the last run alone
    (``live.*``), or a prefix-cache figure."""
    return metric in CACHE_METRICS or metric.startswith("live.") or metric.endswith("_s") or any(
        word in metric for word in ("seconds", "latency", "duration"))


class SweepDigest(BaseModel):
    episodes: dict[str, tuple[str, float | None]]  # episode id -> (status, reward)
    rows: dict[str, dict[str, int]]  # table -> episode id -> visible rows
    metrics: dict[str, dict[str, float]]  # cell id -> its MLflow run's metrics, the incidental ones left out
    parents: int  # MLflow parent runs of the sweep
    children: dict[str, int]  # cell id -> MLflow runs of that cell under the parent
    statuses: list[str]  # the MLflow runs' statuses, parent first, then children by cell


class Comparison(BaseModel):
    lost: int  # rows of the reference that the other lacks
    duplicated: int  # rows the other holds beyond the reference's
    differences: list[str]  # every other way the two differ (empty: the same results)

    @property
    def same(self) -> bool:
        return not (self.lost or self.duplicated or self.differences)


def sweep_digest(sweep_dir: Path, tracking_uri: str | None = None) -> SweepDigest:
    sweep_dir = Path(sweep_dir)
    rows: dict[str, dict[str, int]] = {}
    with duckdb.connect() as con:
        for table, files in table_files(sweep_dir).items():
            rows[table] = dict(con.execute(
                "SELECT episode_id, count(*) FROM read_parquet($files, union_by_name = true, hive_partitioning = false) "
                "GROUP BY episode_id", {"files": [str(f) for f in files]}).fetchall()) if files else {}
        episodes = {e: (status, reward) for e, status, reward in con.execute(
            "SELECT episode_id, status, reward FROM read_parquet($files, union_by_name = true, hive_partitioning = false)",
            {"files": [str(f) for f in table_files(sweep_dir)["episodes"]]}).fetchall()}
    manifest = read_manifest(sweep_dir) or {}
    where = runs.target(manifest, sweep_dir.name)
    client = runs.open_client(tracking_uri or where.tracking_uri)
    experiment = runs.experiment_id(client, where.experiment)
    parents = client.search_runs([experiment], f"tags.`{runs.SWEEP_TAG}` = '{manifest.get('sweep_id')}' "
                                               f"AND tags.`{runs.KIND_TAG}` = 'sweep'")
    children = [c for p in parents for c in client.search_runs([experiment], f"tags.`{runs.PARENT_TAG}` = '{p.info.run_id}'")]
    by_cell: dict[str, int] = {}
    for child in children:
        by_cell[child.data.tags.get(CELL_TAG, "?")] = by_cell.get(child.data.tags.get(CELL_TAG, "?"), 0) + 1
    children.sort(key=lambda r: r.data.tags.get(CELL_TAG, ""))
    return SweepDigest(
        episodes=episodes, rows=rows, parents=len(parents), children=by_cell,
        metrics={c.data.tags.get(CELL_TAG, "?"): {k: v for k, v in c.data.metrics.items()
                                                   if not incidental(k)} for c in children},
        statuses=[r.info.status for r in parents + children])


def without_faults(digest: SweepDigest) -> SweepDigest:
    """``digest`` less the record of failed model calls (the faults table, the ``faults.*`` metrics):
    what a sweep must still equal when a replica died under some of its calls and they were retried
    on another."""
    return digest.model_copy(update={
        "rows": {table: rows for table, rows in digest.rows.items() if table != "faults"},
        "metrics": {cell: {k: v for k, v in metrics.items() if not k.startswith("faults.")}
                    for cell, metrics in digest.metrics.items()}})


def compare(reference: SweepDigest, other: SweepDigest) -> Comparison:
    """How ``other`` differs from ``reference`` (rows lost and duplicated, and everything else)."""
    lost = duplicated = 0
    for table in reference.rows.keys() | other.rows.keys():
        mine, theirs = reference.rows.get(table, {}), other.rows.get(table, {})
        for episode in mine.keys() | theirs.keys():
            gap = theirs.get(episode, 0) - mine.get(episode, 0)
            duplicated += max(gap, 0)
            lost += max(-gap, 0)
    differences = []
    if other.episodes != reference.episodes:
        changed = sorted(e for e in reference.episodes.keys() | other.episodes.keys()
                         if reference.episodes.get(e) != other.episodes.get(e))
        differences.append(f"{len(changed)} episodes differ in id, status or reward (e.g. {changed[:3]})")
    if other.metrics != reference.metrics:
        differences.append("MLflow metrics differ: " + ", ".join(
            f"{cell}.{k}" for cell in sorted(reference.metrics.keys() | other.metrics.keys())
            for k in sorted(reference.metrics.get(cell, {}).keys() | other.metrics.get(cell, {}).keys())
            if reference.metrics.get(cell, {}).get(k) != other.metrics.get(cell, {}).get(k))[:500])
    if other.parents != 1 or set(other.children.values()) != {1} or other.children.keys() != reference.children.keys():
        differences.append(f"MLflow: {other.parents} parent runs, child runs per cell {other.children} "
                           "(expected one parent, one child per cell)")
    if other.statuses != reference.statuses:
        differences.append(f"MLflow statuses {other.statuses} where the reference has {reference.statuses}")
    return Comparison(lost=lost, duplicated=duplicated, differences=differences)
