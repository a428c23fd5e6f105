"""SIGTERM (what ``ray job stop``, Kubernetes and SLURM send) stops ``flowstate run`` as Ctrl-C does,
whenever it arrives, with the Ray the CLI starts itself (``ray.init`` installs its own SIGTERM
handler): while Ray starts, while episodes run, while the sweep is logged at its end. Each time the
run exits 143, its MLflow runs end KILLED, the manifest records the run, the claim is gone, and a
rerun gives what an uninterrupted run gives (real ``flowstate run`` subprocesses, real Ray and
MLflow; the test hook ``FLOWSTATE_SIGNAL_AT`` sends the signal, :mod:`pipeline.core.fault_injection`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from mlflow import MlflowClient

from pipeline.config.job import load_job
from pipeline.config.sweep import expand
from pipeline.core.fault_injection import SIGNAL_ENV
from pipeline.run.launch import run_sweep
from pipeline.store.claim import claim_path
from pipeline.store.manifest import finished_steps, read_manifest
from pipeline.store.reader import finished_episodes
from pipeline.tracking import mlflow_runs as runs
from pipeline.tracking.digest import SweepDigest, compare, sweep_digest
from tests.conftest import REPO_ROOT
from tests.pipeline.conftest import SMALL_ORACLE_JOB

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def reference(oracle_sweep: Path) -> SweepDigest:
    """The session's uninterrupted run of the same job (episode ids do not depend on its name)."""
    return sweep_digest(oracle_sweep)


# Ray starting (the signal sent once ray.init installed its own handler); the third episode
# collected, another running (2 at a time); the first cell's MLflow run logged at the end of the sweep.
@pytest.mark.parametrize("hook", ["starting", "dispatch:3", "tracking"])
def test_sigterm_stops_a_run_as_ctrl_c_does_wherever_it_arrives(hook, reference, ray_local, tmp_path, mlflow_store):
    phase = hook.partition(":")[0]
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({**SMALL_ORACLE_JOB, "name": f"sigterm-{phase}",
                                   "execution": {"concurrency": 2 if phase == "dispatch" else 8}}))
    out = tmp_path / "runs"
    sweep_dir = out / expand(load_job(job)).sweep_id
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}  # a Ray of its own, started by the CLI
    stopped = subprocess.run([sys.executable, "-m", "pipeline.cli", "run", str(job), "--out", str(out)], cwd=REPO_ROOT,
                             env={**env, "PYTHONPATH": str(REPO_ROOT), SIGNAL_ENV: hook},
                             capture_output=True, text=True, timeout=240)
    output = stopped.stdout + stopped.stderr
    assert stopped.returncode == 128 + signal.SIGTERM, output
    assert f"SIGTERM at {phase}" in stopped.stderr and "interrupted" in output, output
    assert "Traceback" not in output and "SIGTERM received" not in output, output  # no crash dump either

    manifest = read_manifest(sweep_dir)
    [record] = manifest["runs"]
    done = finished_episodes(sweep_dir).done
    if phase == "tracking":  # every episode ran and was compacted; the logging stopped
        assert not record["interrupted"] and len(done) == 8 and "tracked" not in finished_steps(sweep_dir)
    else:
        # what the run counted is what its files hold: the episodes still in flight that finished
        # (returned, or wrote their rows as the stop cancelled them) included
        assert record["interrupted"] and (3 if phase == "dispatch" else 0) <= record["completed"] == len(done) < 8
        assert phase == "starting" or f"episodes {len(done)}/8 done ({len(done)} ok" in stopped.stdout
    client = MlflowClient(mlflow_store)
    parent = client.get_run(manifest["mlflow_run_id"])
    children = runs.child_runs(client, parent.info.experiment_id, parent.info.run_id).values()
    assert len(children) == 4 and {r.info.status for r in (parent, *children)} == {"KILLED"}
    assert not claim_path(sweep_dir).exists()

    result = run_sweep(job, out=out)  # the rerun, here on the session's Ray
    assert (result.skipped, result.failed, result.finish_errors, result.interrupted) == (len(done), 0, [], False)
    comparison = compare(reference, sweep_digest(sweep_dir))
    assert comparison.same, comparison
    assert not list(sweep_dir.rglob("*.tmp"))


def test_a_stopped_run_counts_every_episode_its_files_hold(ray_local, tmp_path):
    """Stopped at the first episode collected, 8 in flight: those that finished meanwhile (returned
    uncollected, or wrote their rows as the stop cancelled them) are counted, in the progress line
    and the run's record, as the files hold them (the line once said 96 where 101 were on disk)."""
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({**SMALL_ORACLE_JOB, "name": "stop-count", "execution": {"concurrency": 8}}))
    out = tmp_path / "runs"
    sweep_dir = out / expand(load_job(job)).sweep_id
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    stopped = subprocess.run([sys.executable, "-m", "pipeline.cli", "run", str(job), "--out", str(out)], cwd=REPO_ROOT,
                             env={**env, "PYTHONPATH": str(REPO_ROOT), SIGNAL_ENV: "dispatch:1"},
                             capture_output=True, text=True, timeout=240)
    assert stopped.returncode == 128 + signal.SIGTERM, stopped.stdout + stopped.stderr
    done = len(finished_episodes(sweep_dir).done)
    [record] = read_manifest(sweep_dir)["runs"]
    last = [line for line in stopped.stdout.splitlines() if line.startswith("episodes ")][-1]
    assert last.startswith(f"episodes {done}/8 done ({done} ok") and record["completed"] == done >= 1, (last, done)
