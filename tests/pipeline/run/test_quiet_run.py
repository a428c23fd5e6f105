"""A run as a user starts it, from a shell that has not activated the environment: its closing hints
are commands that work as typed, and it prints no noise (llama.cpp's warning about the vocabulary-only
model that counts tokens, Ray's warning that it chose token authentication)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml

from tests.conftest import REPO_ROOT
from tests.pipeline.cli.test_commands import BARE_PATH, BIN, works_as_typed
from tests.pipeline.conftest import SMALL_ORACLE_JOB

NOISE = ("n_ctx_train", "llama_context", "Token authentication")


def test_a_run_prints_no_noise_and_hints_that_work_as_typed(tmp_path: Path) -> None:
    job = {**SMALL_ORACLE_JOB, "benchmarks": SMALL_ORACLE_JOB["benchmarks"][:1],
           "analysis": {"baseline": "full_context", "count_tokens": "smollm2"}}  # llama.cpp loads SmolLM2's vocabulary
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job))
    fresh = ("RAY_AUTH_MODE", "RAY_ADDRESS", "MLFLOW_TRACKING_URI")  # as a new shell has them: unset
    env = {k: v for k, v in os.environ.items() if k not in fresh}
    proc = subprocess.run([str(BIN / "flowstate"), "run", "job.yaml", "--out", "runs"], cwd=tmp_path, text=True,
                          env={**env, "PATH": BARE_PATH, "PYTHONPATH": str(REPO_ROOT)}, capture_output=True, timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert "Started a local Ray instance" in output  # this run started Ray (where it would have warned)
    assert not [line for line in output.splitlines() if any(noise in line for noise in NOISE)], output
    sweep = next((tmp_path / "runs").iterdir())
    hints = dict(line.strip().split(": ", 1) for line in proc.stdout.splitlines() if line.startswith("  "))
    assert hints["report"] == f"{BIN / 'flowstate'} report {sweep.relative_to(tmp_path)}"
    assert hints["compare runs"].startswith(f"{BIN / 'mlflow'} ui --backend-store-uri sqlite:///")
    for command in (hints["report"], hints["compare runs"]):
        works_as_typed(command.split(" ")[0], BARE_PATH, tmp_path)
