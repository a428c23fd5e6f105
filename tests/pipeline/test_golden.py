"""Ids and prompt bytes frozen before the plug-in refactor (tests/golden/README.md): reshaping the job
models or the method layer must change none of them, or a sweep that is running when a user upgrades
stops resuming, or the paper's prompts drift."""

from __future__ import annotations

import asyncio
import hashlib
import json

import pytest

from flowstate import RequestStart, new_session
from pipeline.benchmarks.taubench import TAUBENCH, TauBenchCell
from pipeline.config.job import load_job
from pipeline.config.sweep import expand
from tests.conftest import REPO_ROOT

GOLDEN = REPO_ROOT / "tests" / "golden"
IDS = json.loads((GOLDEN / "shipped_job_ids.json").read_text())
PROMPTS = json.loads((GOLDEN / "taubench_prompts.json").read_text())


# Jobs over data the tests do not have (MemoryArena's dataset, which users fetch): their ids hash
# its checksums, so they are parsed and checked cell by cell in test_config.py instead.
NEEDS_FETCHED_DATA = {"paper-ablations.yaml", "paper-memoryarena.yaml", "paper-models.yaml"}


def test_every_shipped_job_is_pinned() -> None:
    assert sorted(IDS) == sorted(p.name for p in (REPO_ROOT / "jobs").glob("*.yaml") if p.name not in NEEDS_FETCHED_DATA)


@pytest.mark.parametrize("job", sorted(IDS))
def test_sweep_cell_and_episode_ids_are_unchanged(job: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("FLOWSTATE_MODEL", "FLOWSTATE_MODEL_LABEL", "FLOWSTATE_REPLICAS", "FLOWSTATE_TP",
                     "FLOWSTATE_EMBEDDING_MODEL"):
        monkeypatch.delenv(variable, raising=False)  # the job's defaults
    sweep = expand(load_job(REPO_ROOT / "jobs" / job))
    golden = IDS[job]
    assert sweep.sweep_id == golden["sweep_id"]
    assert {c.label: c.cell_id for c in sweep.cells} == golden["cells"]
    assert {f"{e.cell.label}/{e.task_id}/{e.trial}": e.episode_id for e in sweep.episodes} == golden["episodes"]


@pytest.mark.parametrize("key", sorted(PROMPTS))
def test_taubench_prompt_bytes_and_schemas_are_unchanged(key: str) -> None:
    domain, rendering, method, protocol = key.split("/")
    cell = TauBenchCell(domain=domain, tool_rendering=rendering)
    session = new_session({"name": method, "protocol": protocol}, TAUBENCH.task_prompt(cell, "0"),
                          TAUBENCH.tool_names(cell, "0"))
    asyncio.run(session.begin_request(RequestStart(index=1, query="Hello, I need help.", memory_query="")))
    messages = asyncio.run(session.messages(None))
    text = json.dumps([m.model_dump() for m in messages], ensure_ascii=False)
    assert hashlib.sha256(text.encode()).hexdigest() == PROMPTS[key]["messages_sha256"]
    schema = hashlib.sha256(json.dumps(session.json_schema, sort_keys=True).encode()).hexdigest() if session.json_schema else None
    assert schema == PROMPTS[key]["schema_sha256"]
