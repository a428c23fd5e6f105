"""Crash anywhere, same results: ``flowstate run`` dies at each named phase (the test hook
``FLOWSTATE_CRASH_AT``, :mod:`pipeline.core.fault_injection`), a rerun finishes the sweep, and what it holds
equals an uninterrupted run of the same job: episode ids, rewards, metrics, rows per table and
episode (0 lost, 0 duplicated), one MLflow parent with one child per cell, read back through MLflow."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import ray
import yaml

from pipeline.config.job import load_job
from pipeline.config.sweep import expand
from pipeline.core.fault_injection import CRASH_ENV, CRASH_EXIT_CODE, Phase, wait_until_settled
from pipeline.run.launch import run_sweep
from pipeline.store.manifest import finished_steps
from pipeline.store.reader import finished_episodes
from pipeline.tracking.digest import SweepDigest, compare, sweep_digest
from tests.conftest import REPO_ROOT
from tests.pipeline.conftest import SMALL_ORACLE_JOB

pytestmark = pytest.mark.slow

# The n-th time of each phase the driver dies at (8 episodes, 4 cells, 2 at a time, so that some
# are still running at the crash; an episode writes 6 files). Not ``starting``: nothing has run yet.
NTH: dict[Phase, int] = {"dispatch": 3, "write": 8, "compaction": 2, "grading": 3, "tracking": 2}
IN_ACTOR: frozenset[Phase] = frozenset({"write", "grading"})  # the actor SIGKILLs its driver


@pytest.fixture(scope="module")
def reference(oracle_sweep: Path) -> SweepDigest:
    """The session's uninterrupted run of the same job (episode ids do not depend on its name)."""
    return sweep_digest(oracle_sweep)


@pytest.mark.parametrize("phase", list(NTH))
def test_a_driver_that_dies_at_any_phase_leaves_the_same_results_after_a_rerun(phase, reference, ray_local, tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({**SMALL_ORACLE_JOB, "name": f"crash-{phase}", "execution": {"concurrency": 2}}))
    runs = tmp_path / "runs"
    sweep_dir = runs / expand(load_job(job)).sweep_id
    crashed = subprocess.run(  # on the session's Ray: no second cluster to start
        [sys.executable, "-m", "pipeline.cli", "run", str(job), "--out", str(runs),
         "--address", ray.get_runtime_context().gcs_address],
        cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT), CRASH_ENV: f"{phase}:{NTH[phase]}"},
        capture_output=True, text=True, timeout=240)
    output = crashed.stdout + crashed.stderr
    if phase in IN_ACTOR:
        assert crashed.returncode == -signal.SIGKILL, output
    else:
        assert crashed.returncode == CRASH_EXIT_CODE and f"crashing at {phase} ({NTH[phase]})" in crashed.stderr, output
    wait_until_settled(sweep_dir)
    done, steps = finished_episodes(sweep_dir).done, finished_steps(sweep_dir)
    if phase == "compaction":
        assert len(done) == 8 and "compacted" not in steps
    elif phase == "tracking":
        assert len(done) == 8 and "compacted" in steps and "tracked" not in steps
    else:
        assert len(done) < 8

    result = run_sweep(job, out=runs)
    assert (result.skipped, result.failed, result.finish_errors) == (len(done), 0, [])
    comparison = compare(reference, sweep_digest(sweep_dir))
    assert comparison.same, comparison
    assert not list(sweep_dir.rglob("*.tmp"))
