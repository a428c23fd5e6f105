"""Grading as its own stage: grade stored transcripts again, without re-simulating.

``flowstate grade RUN_DIR`` reads each episode's transcript and termination from the run's tables,
grades it with its benchmark (on each cell's basis, or the one given), and rewrites the episodes and
request-outcome rows in place, file by file and atomically, so the layout (per-episode or compacted)
is kept. Rows are rewritten in the current schema, so this also upgrades a sweep written by an
older version.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ValidationError

from flowstate import Policy
from pipeline.benchmarks.base import EpisodeRecord, JudgeRequiredError, benchmark_of
from pipeline.benchmarks.transcript import TranscriptMessage, TranscriptToolCall
from pipeline.config.job import JobConfig, parse_job
from pipeline.config.sweep import job_cells
from pipeline.core.plugins import load_plugins
from pipeline.core.specs import Cell
from pipeline.run.episode import grade_episode
from pipeline.run.rows import grade_columns, request_outcome_rows
from pipeline.store.claim import claim_sweep
from pipeline.store.files import PART_META_KEY, NoResultsError, table_files
from pipeline.store.manifest import MANIFEST, ManifestError, forget_finished, read_manifest
from pipeline.store.reader import select
from pipeline.store.schema import EPISODES, ID_FIELDS, REQUEST_OUTCOMES, SCHEMA_VERSION, rows_table
from pipeline.store.writer import episode_file, write_parquet_atomic


class RegradeSummary(BaseModel):
    episodes: int
    changed: int
    still_ungraded: int
    needs_judge: int
    mean_reward: float | None


def load_transcripts(files: list[Path]) -> dict[str, list[TranscriptMessage]]:
    """episode_id -> its transcript in order (one query over the sweep's transcript files)."""
    rows = select(files,
                  "episode_id, request, role, content, tool_calls_json, tool_call_id, error", "ORDER BY episode_id, seq")
    transcripts: dict[str, list[TranscriptMessage]] = defaultdict(list)
    for r in rows:
        calls = [TranscriptToolCall.model_validate(c) for c in json.loads(r["tool_calls_json"])] if r["tool_calls_json"] else None
        transcripts[r["episode_id"]].append(TranscriptMessage(
            role=r["role"], content=r["content"], tool_calls=calls, tool_call_id=r["tool_call_id"],
            error=bool(r["error"]), request=r["request"]))
    return transcripts


def sweep_job(sweep_dir: Path, plugins: Sequence[str] = ()) -> JobConfig:
    """The job the manifest recorded, known through the installed plug-ins and ``plugins`` (the
    user's ``--plugin``): the modules the manifest names are never imported, since a results folder
    is data, not code to run."""
    manifest = read_manifest(sweep_dir)
    if manifest is None or "job" not in manifest:
        raise NoResultsError(f"{sweep_dir}: no manifest.json with the job (is this a sweep directory?)")
    load_plugins(plugins)
    try:
        return parse_job({**manifest["job"], "plugins": []})  # plugins: no part of an id
    except ValidationError as exc:
        error = exc.errors()[0]
        named = [m for m in manifest["job"].get("plugins") or [] if m not in plugins]
        hint = (f"; the sweep ran with the plug-ins {', '.join(named)}: if you trust them, name each with "
                "--plugin MODULE") if named else ""
        raise ManifestError(f"{sweep_dir / MANIFEST}: its job cannot be read here: "
                            f"{'.'.join(str(p) for p in error['loc'])}: {error['msg']}{hint}") from None


def _cells_by_stored_id(sweep_dir: Path, job: JobConfig) -> dict[str, Cell]:
    """The job's cells by the ids its rows carry. The manifest lists those in the job's cell order,
    so a sweep made before a cell's identity changed (group travel's text revision) is graded too."""
    cells = job_cells(job)
    stored = [c["cell_id"] for c in (read_manifest(sweep_dir) or {}).get("cells", [])]
    ids = stored if len(stored) == len(cells) else [c.cell_id for c in cells]
    return dict(zip(ids, cells, strict=True))


def _ids(row: dict[str, Any]) -> dict[str, Any]:
    return {f.name: row[f.name] for f in ID_FIELDS} | {"schema_version": SCHEMA_VERSION}


async def regrade(sweep_dir: Path, *, basis: str | None = None, judge: Policy | None = None,
                  plugins: Sequence[str] = ()) -> RegradeSummary:
    """Grade every simulated episode of a sweep again; infrastructure failures are left as they are.
    ``plugins``: modules to import for the sweep's benchmarks beside the installed ones (never those
    its manifest names). Takes the sweep's claim: it rewrites the episodes table."""
    job = sweep_job(sweep_dir, plugins)
    with claim_sweep(sweep_dir, "grade"):
        forget_finished(sweep_dir)  # rewritten rows: the compacted parts may stay, MLflow is out of date
        return await _regrade(sweep_dir, job, basis, judge)


async def _regrade(sweep_dir: Path, job: JobConfig, basis: str | None, judge: Policy | None) -> RegradeSummary:
    files = table_files(sweep_dir)
    if not files["episodes"]:
        raise NoResultsError(f"{sweep_dir}: no episodes table (is this a sweep directory?)")
    cells = _cells_by_stored_id(sweep_dir, job)
    transcripts = load_transcripts(files["transcript"])
    changed = ungraded = total = needs_judge = 0
    rewards: list[float] = []
    outcomes: dict[str, list[dict[str, Any]]] = {}
    cell_of: dict[str, str] = {}
    for path in files["episodes"]:
        stored = pq.read_table(path)
        rows = stored.to_pylist()
        for row in rows:
            if row["status"] == "failed":
                continue
            total += 1
            record = EpisodeRecord(transcript=transcripts.get(row["episode_id"], []), termination=row["termination"])
            cell = cells[row["cell_id"]].benchmark
            judged_by = judge
            if judged_by is None and job.judge == "scripted":
                judged_by = benchmark_of(cell).scripted_judge(cell, row["task_id"])
            try:
                grade, error = await grade_episode(cell, row["task_id"], record, judged_by, basis)
            except JudgeRequiredError:
                needs_judge += 1
                continue
            before = (row.get("reward"), row.get("status"))
            row.update(grade_columns(grade), status="completed" if grade is not None else "grading_failed", error=error,
                       schema_version=SCHEMA_VERSION)
            outcomes[row["episode_id"]] = request_outcome_rows(_ids(row), grade)
            cell_of[row["episode_id"]] = row["cell_id"]
            changed += (row["reward"], row["status"]) != before
            if grade is None:
                ungraded += 1
            else:
                rewards.append(grade.reward)
        _rewrite(path, stored.schema, EPISODES, rows)
    _rewrite_request_outcomes(sweep_dir, files["request_outcomes"], outcomes, cell_of)
    return RegradeSummary(episodes=total, changed=changed, still_ungraded=ungraded, needs_judge=needs_judge,
                          mean_reward=sum(rewards) / len(rewards) if rewards else None)


def _rewrite(path: Path, stored: pa.Schema, schema: pa.Schema, rows: list[dict[str, Any]]) -> None:
    """Rewrite a file in the current schema; the file's own metadata is kept (a compacted part lists
    its episodes there). Rows written by an older schema lose the columns it no longer has."""
    full = [{name: row.get(name) for name in schema.names} for row in rows]
    part = (stored.metadata or {}).get(PART_META_KEY.encode())
    episodes = json.loads(part)["episodes"] if part else [path.stem]  # a part's, or the per-episode file's
    write_parquet_atomic(path, rows_table(full, schema.with_metadata(stored.metadata)), episodes)


def _rewrite_request_outcomes(sweep_dir: Path, files: list[Path], outcomes: dict[str, list[dict[str, Any]]],
                              cell_of: dict[str, str]) -> None:
    """Replace the request rows of every re-graded episode, in whichever file holds them."""
    placed: set[str] = set()
    for path in files:
        stored = pq.read_table(path)
        rows = stored.to_pylist()
        kept = [r for r in rows if r["episode_id"] not in outcomes]
        held = {r["episode_id"] for r in rows} & set(outcomes)
        placed |= held
        if held:
            _rewrite(path, stored.schema, REQUEST_OUTCOMES, kept + [r for e in sorted(held) for r in outcomes[e]])
    for episode_id, rows in outcomes.items():
        if episode_id not in placed and rows:
            path = episode_file(sweep_dir, "request_outcomes", cell_of[episode_id], episode_id)
            write_parquet_atomic(path, rows_table(rows, REQUEST_OUTCOMES), [episode_id])
