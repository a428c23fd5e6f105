"""Job files: strict parsing with errors that name the file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config import load_job
from pipeline.yaml_errors import ConfigError
from tests.conftest import REPO_ROOT

GOOD = """\
name: small
benchmarks:
  - {benchmark: taubench, domain: airline, tasks: ["0", "1"], reward_basis: classic}
methods:
  - {name: flowstate}
  - {name: full_context, protocol: json}
agents:
  - {deployment: oracle}
user_simulator: scripted
judge: none
deployments:
  oracle: {kind: scripted, name: oracle}
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return path


def test_a_valid_job_gets_the_papers_sampling_defaults(tmp_path):
    job = load_job(_write(tmp_path, GOOD))
    assert [m.display for m in job.methods] == ["flowstate", "full_context-json"]
    sampling = job.agents[0].sampling
    assert (sampling.temperature, sampling.top_p, sampling.max_tokens, sampling.enable_thinking) == (0.1, 1.0, 32768, False)


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO_ROOT / "jobs").glob("*.yaml")))
def test_every_shipped_job_parses(name):
    job = load_job(REPO_ROOT / "jobs" / name)
    assert job.agents and job.benchmarks


@pytest.mark.parametrize(("edit", "expected"), [
    (("judge: none", "judge: none\ncolour: blue"), r"job.yaml:11: unknown key 'colour'"),
    (("  - {name: flowstate}", "  - {name: flowstate, protocol: xml}"), r"job.yaml:5: methods.0.protocol: Input should be 'tagged' or 'json'"),
    (("domain: airline", "domain: banking"), r"job.yaml:3: benchmarks.0.domain"),
    (("name: small\n", ""), r"missing key 'name'"),
    (("  oracle: {kind: scripted, name: oracle}", "  other: {kind: scripted, name: oracle}"), r"'oracle' is not under 'deployments'"),
    (("  oracle: {kind: scripted, name: oracle}", "  oracle: {kind: vllm}"), r"job.yaml:12: missing key 'deployments.oracle.model'"),
])
def test_bad_jobs_name_the_line_and_key(tmp_path, edit, expected):
    old, new = edit
    text = GOOD.replace(old, new)
    with pytest.raises(ConfigError, match=expected):
        load_job(_write(tmp_path, text))


def test_a_retail_task_basis_without_a_judge_is_refused(tmp_path):
    text = GOOD.replace("domain: airline, tasks: [\"0\", \"1\"], reward_basis: classic", "domain: retail")
    with pytest.raises(ConfigError, match="name a judge"):
        load_job(_write(tmp_path, text))


@pytest.mark.parametrize("text", ["name: [unclosed", "- just\n- a list\n"])
def test_not_yaml_or_not_a_mapping(tmp_path, text):
    with pytest.raises(ConfigError, match="job.yaml"):
        load_job(_write(tmp_path, text))


def test_a_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_job(tmp_path / "nope.yaml")
