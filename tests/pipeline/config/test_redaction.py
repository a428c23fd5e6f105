"""Secrets of a job (pipeline/config/secrets.py): what counts as one, how it is written, and that no id
hashes one. The end-to-end canary sweep is in test_leaks.py."""

from __future__ import annotations

import json
import os
import pickle
import re
from pathlib import Path

import pytest

from pipeline.config.job import ConfigError, load_job, parse_job
from pipeline.config.secrets import REDACTED, Secrets, looks_secret, names_secret_variable, redacted_job_text, restore
from pipeline.config.sweep import expand, job_cells
from pipeline.llm.kinds.endpoint import EndpointDeployment, EndpointSpec
from pipeline.run.manifest import write_manifest
from tests.conftest import REPO_ROOT


@pytest.mark.parametrize(("name", "secret"), [
    ("OPENAI_API_KEY", True), ("HF_TOKEN", True), ("DB_PASSWORD", True), ("AWS_SECRET_ACCESS_KEY", True),
    ("MLFLOW_TRACKING_PASSWORD", True), ("apiKey", True), ("Authorization", True), ("X-Api-Key", True),
    ("api_key", True), ("FLOWSTATE_MODEL", False), ("FLOWSTATE_TOKENIZER", False), ("max_tokens", False),
    ("tokenizer", False), ("piece_tokens", False), ("monkey", False), ("api_key_env", False),
])
def test_names_that_read_as_secrets(name, secret):
    assert looks_secret(name) is secret


def test_keys_ending_in_env_name_the_variable_that_holds_a_secret():
    assert names_secret_variable("api_key_env") and names_secret_variable("TOKEN_ENV")
    assert not names_secret_variable("model_env") and not names_secret_variable("env")


def test_known_values_secret_keys_and_url_passwords_are_replaced_and_redacting_twice_changes_nothing():
    secrets = Secrets.of_job({"deployments": {"a": {"api_key_env": "KEY_VAR"}}},
                             {"DB_PASSWORD": "hunter22", "FLOWSTATE_MODEL": "org/model"}, {"KEY_VAR": "sk-12345678"})
    data = {"uri": "postgresql://u:hunter22@db/mlflow", "header": "Bearer sk-12345678", "model": "org/model",
            "extra": {"api_key": "written-literally", "token": "${FROM_A_VARIABLE}", "tokens": 5},
            "urls": ["https://u:literal@h/v1", "https://h/v1?token=abc&page=2", "http://h/v1?api-version=3"]}
    redacted = secrets.redact(data)
    assert redacted == {"uri": "postgresql://u:${DB_PASSWORD}@db/mlflow", "header": f"Bearer {REDACTED}",
                        "model": "org/model", "extra": {"api_key": REDACTED, "token": "${FROM_A_VARIABLE}", "tokens": 5},
                        "urls": ["https://u:***@h/v1", "https://h/v1?token=***&page=2", "http://h/v1?api-version=3"]}
    assert secrets.redact(redacted) == redacted and Secrets().redact(redacted) == redacted


VLLM_JOB = """\
name: keyed
benchmarks:
  - {benchmark: taubench, domain: airline, tasks: ["0"], reward_basis: classic}
methods:
  - {name: flowstate}
agents:
  - {deployment: agent}
user_simulator: scripted
deployments:
  agent:
    kind: vllm
    model: ${FLOWSTATE_MODEL:-org/model}
    engine_args: {api_key: "${VLLM_API_KEY}", max_model_len: 4096}
  api:
    kind: endpoint
    base_url: http://127.0.0.1:9/v1
    model: m
    api_key_env: FLOWSTATE_TEST_API_KEY
    sampling: {extra_body: {api_key: written-literally}}
"""


def _job(tmp_path: Path, text: str = VLLM_JOB) -> Path:
    path = tmp_path / "keyed.yaml"
    path.write_text(text)
    return path


def _ids(path: Path) -> tuple[str, list[str], list[str]]:
    sweep = expand(load_job(path))
    return sweep.sweep_id, [c.cell_id for c in sweep.cells], [e.episode_id for e in sweep.episodes]


def test_no_secret_enters_a_sweep_cell_or_episode_id(tmp_path, monkeypatch):
    """A rotated key resumes the same sweep; a changed model does not."""
    monkeypatch.setenv("VLLM_API_KEY", "sk-first")
    monkeypatch.setenv("FLOWSTATE_TEST_API_KEY", "sk-api-first")
    first = _ids(_job(tmp_path))
    monkeypatch.setenv("VLLM_API_KEY", "sk-second")
    monkeypatch.setenv("FLOWSTATE_TEST_API_KEY", "sk-api-second")
    assert _ids(_job(tmp_path, VLLM_JOB.replace("written-literally", "another-literal"))) == first
    monkeypatch.setenv("FLOWSTATE_MODEL", "org/other")
    other = _ids(_job(tmp_path))
    assert other[0] != first[0] and not set(other[2]) & set(first[2])
    resolved = json.dumps(load_job(_job(tmp_path)).to_resolved())
    assert "sk-second" not in resolved and "${VLLM_API_KEY}" in resolved and "written-literally" not in resolved


def test_the_manifest_writes_references_and_stars_and_regrading_finds_the_same_cells(tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_API_KEY", "sk-vllm-canary")
    monkeypatch.setenv("FLOWSTATE_TEST_API_KEY", "sk-api-canary")
    job = load_job(_job(tmp_path))
    sweep = expand(job)
    deployments = {"agent": {"command": ["vllm", "serve", "org/model", "--api-key", "sk-vllm-canary"]},
                   "api": {"base_url": "http://127.0.0.1:9/v1"}}
    write_manifest(sweep, tmp_path, job_path=_job(tmp_path), deployments=deployments)
    text = (tmp_path / "manifest.json").read_text()
    assert "sk-vllm-canary" not in text and "sk-api-canary" not in text and "written-literally" not in text
    manifest = json.loads(text)
    assert manifest["job"]["deployments"]["agent"]["engine_args"]["api_key"] == "${VLLM_API_KEY}"
    assert manifest["job"]["deployments"]["api"]["sampling"]["extra_body"]["api_key"] == REDACTED
    assert manifest["deployments"]["agent"]["command"][-1] == "${VLLM_API_KEY}"
    # `flowstate grade` reads the job back from the manifest: its cells are the sweep's
    assert [c.cell_id for c in job_cells(parse_job(manifest["job"]))] == [c.cell_id for c in sweep.cells]


def test_the_job_file_artifact_masks_what_the_file_holds_literally(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWSTATE_TEST_API_KEY", "sk-pasted-in-a-comment")
    text = VLLM_JOB + ("# the key was sk-pasted-in-a-comment\n"
                       "tracking: {tracking_uri: 'postgresql://flow:literal-pw@db/mlflow'}\n")
    written = redacted_job_text(_job(tmp_path, text))
    assert "written-literally" not in written and "literal-pw" not in written and "sk-pasted" not in written
    assert 'api_key: "${VLLM_API_KEY}"' in written and "postgresql://flow:***@db/mlflow" in written
    assert written.count("\n") == text.count("\n")  # the file as written, line for line


@pytest.mark.parametrize(("edit", "where"), [
    (("{deployment: agent}", "{deployment: agent, label: '${FLOWSTATE_LABEL_TOKEN}'}"), "agents[0].label"),
    (("{name: flowstate}", "{name: flowstate, label: '${FLOWSTATE_LABEL_TOKEN}'}"), "methods[0].label"),
    (("http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1?key=literal"), "deployments.api.base_url"),
])
def test_a_name_written_into_results_cannot_hold_a_secret(tmp_path, monkeypatch, edit, where):
    monkeypatch.setenv("VLLM_API_KEY", "sk-vllm")
    monkeypatch.setenv("FLOWSTATE_LABEL_TOKEN", "sk-label")
    with pytest.raises(ConfigError, match=f"keyed.yaml: {re.escape(where)} holds a secret"):
        load_job(_job(tmp_path, VLLM_JOB.replace(*edit)))


def test_an_error_about_a_value_does_not_quote_a_secret(tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_API_KEY", "sk-vllm")
    monkeypatch.setenv("FLOWSTATE_REPLICAS_TOKEN", "sk-not-a-number")
    with pytest.raises(ConfigError, match=r"deployments.agent.replicas: .*\(got '\$\{FLOWSTATE_REPLICAS_TOKEN\}'\)") as info:
        load_job(_job(tmp_path, VLLM_JOB.replace("    engine_args:",
                                                 "    replicas: ${FLOWSTATE_REPLICAS_TOKEN}\n    engine_args:")))
    assert "sk-not-a-number" not in str(info.value)


def test_a_redacted_value_is_read_again_from_the_environment_unless_it_was_written_literally(monkeypatch):
    monkeypatch.setenv("MLFLOW_DB_PASSWORD", "pw")
    assert restore("postgresql://u:${MLFLOW_DB_PASSWORD}@db/mlflow", "uri") == "postgresql://u:pw@db/mlflow"
    with pytest.raises(ValueError, match="uri holds a secret the job file wrote literally"):
        restore("postgresql://u:***@db/mlflow", "uri")


def test_a_variable_holding_a_url_with_a_password_is_written_as_its_reference_and_read_again(monkeypatch):
    """``tracking_uri: "${MLFLOW_URI}"``: the name reads as no secret, the value holds one."""
    uri = "https://alice:s3cret-pw@mlflow.example/"
    written = Secrets.of_job({}, {"MLFLOW_URI": uri, "MLFLOW_HOST": "https://mlflow.example/"}).redact(
        {"tracking_uri": uri, "other": "https://mlflow.example/"})
    assert written == {"tracking_uri": "${MLFLOW_URI}", "other": "https://mlflow.example/"}
    monkeypatch.setenv("MLFLOW_URI", uri)
    assert restore(written["tracking_uri"], "tracking.tracking_uri") == uri


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO_ROOT / "jobs").glob("*.yaml")))
def test_no_shipped_job_setting_is_mistaken_for_a_secret(name):
    job = load_job(REPO_ROOT / "jobs" / name)
    dumped = job.model_dump(mode="json")
    assert job.secrets().redact(dumped) == dumped


def test_an_endpoints_key_travels_with_it_to_a_process_whose_environment_lacks_it(monkeypatch):
    spec = EndpointSpec(base_url="http://127.0.0.1:9/v1", model="m", api_key_env="FLOWSTATE_TEST_API_KEY")
    monkeypatch.setenv("FLOWSTATE_TEST_API_KEY", "sk-travels")
    pickled = pickle.dumps(EndpointDeployment(spec))
    monkeypatch.delenv("FLOWSTATE_TEST_API_KEY")
    assert pickle.loads(pickled).spec == spec
    assert os.environ["FLOWSTATE_TEST_API_KEY"] == "sk-travels"
    monkeypatch.delenv("FLOWSTATE_TEST_API_KEY")
    pickle.loads(pickle.dumps(EndpointDeployment(spec)))  # unset in the sender: nothing is carried
    assert "FLOWSTATE_TEST_API_KEY" not in os.environ


def test_values_too_short_to_be_credentials_are_not_searched_for():
    """``EMPTY`` (local servers' placeholder key) would otherwise mask every text that contains it."""
    secrets = Secrets.of_job({"api_key_env": "LOCAL_KEY"}, {"HF_TOKEN": "abc"},
                             environ={"LOCAL_KEY": "EMPTY"})
    assert secrets.redact({"model": "EMPTY-abc-model"}) == {"model": "EMPTY-abc-model"}
    long = Secrets.of_job({"api_key_env": "LOCAL_KEY"}, environ={"LOCAL_KEY": "sk-12345678"})
    assert long.redact({"note": "key sk-12345678 here"}) == {"note": f"key {REDACTED} here"}
