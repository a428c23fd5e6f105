"""Grading as its own stage: grade stored transcripts again, without re-simulating.

``flowstate grade RUN_DIR`` reads each episode's transcript and termination from the run's
tables, grades it (on each cell's basis, or the one given), and rewrites the episodes rows in
place, file by file and atomically, so the layout (per-episode or compacted) is kept.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel

from flowstate import Policy
from pipeline.benchmarks import taubench
from pipeline.benchmarks.transcript import TranscriptMessage, TranscriptToolCall
from pipeline.episodes import grade_with_retries
from pipeline.store.files import table_files
from pipeline.store.reader import select
from pipeline.store.rows import reward_columns
from pipeline.store.writer import write_parquet_atomic


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


async def regrade(sweep_dir: Path, *, basis: Literal["task", "classic"] | None = None,
                  judge: Policy | None = None) -> RegradeSummary:
    """Grade every simulated episode of a sweep again; infrastructure failures are left as they are."""
    files = table_files(sweep_dir)
    if not files["episodes"]:
        raise FileNotFoundError(f"{sweep_dir}: no episodes table (is this a sweep directory?)")
    transcripts = load_transcripts(files["transcript"])
    changed = ungraded = total = needs_judge = 0
    rewards: list[float] = []
    for path in files["episodes"]:
        stored = pq.read_table(path)
        rows = stored.to_pylist()
        for row in rows:
            if row["status"] == "failed":
                continue
            total += 1
            task = taubench.get_task(row["domain"], row["task_id"])
            row_basis = basis or ("classic" if row["reward_basis"].startswith("classic") else "task")
            try:
                reward, error = await grade_with_retries(task, transcripts.get(row["episode_id"], []),
                                                         row["termination"], basis=row_basis, judge=judge)
            except taubench.JudgeRequiredError:
                needs_judge += 1
                continue
            before = (row["reward"], row["status"])
            _apply(row, reward, error)
            changed += (row["reward"], row["status"]) != before
            if reward is None:
                ungraded += 1
            else:
                rewards.append(reward.reward)
        # the file's own schema keeps its footer metadata (a compacted part lists its episodes there)
        write_parquet_atomic(path, pa.Table.from_pylist(rows, schema=stored.schema))
    return RegradeSummary(episodes=total, changed=changed, still_ungraded=ungraded, needs_judge=needs_judge,
                          mean_reward=sum(rewards) / len(rewards) if rewards else None)


def _apply(row: dict, reward: taubench.RewardInfo | None, error: str | None) -> None:
    row.update(reward_columns(reward, row["reward_basis"]))
    row["status"] = "completed" if reward is not None else "grading_failed"
    row["error"] = error
