"""WordLlama, the embedded default's embedding model: the pinned files, the project's
/v1/embeddings server, a deployment of it on Ray, and nothing fetched at run time."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import ray

from pipeline.config.job import JobConfig
from pipeline.llm import DeploymentStartError, EmbeddingClient, make_deployment
from pipeline.llm.deployments import replica_options
from pipeline.llm.kinds.wordllama import WordLlamaSpec, server_command
from pipeline.llm.kinds.wordllama.model import MODELS, ModelFileError, TextEmbedder, verified_file
from pipeline.llm.kinds.wordllama.server import EmbeddingsApp
from tests.conftest import DATA_DIR, REPO_ROOT
from tests.listening import all_loopback, listening_addresses


def test_embeddings_are_unit_length_similar_texts_are_closer_and_empty_texts_are_zero():
    embedder = TextEmbedder(dim=128)
    vectors = embedder.embed(["book a flight to paris", "reserve a plane ticket to paris", "the cat sat on the mat", ""])
    assert vectors.shape == (4, 128)
    assert np.allclose(np.linalg.norm(vectors[:3], axis=1), 1.0, atol=1e-5) and not vectors[3].any()
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    assert embedder.token_counts(["hello world", ""]) == [2, 0]


def test_a_changed_model_file_is_refused(monkeypatch, tmp_path):
    files = MODELS["l2_supercat"]
    (tmp_path / "weights").mkdir()
    (tmp_path / files.weights).write_bytes(b"not the weights")
    monkeypatch.setattr("pipeline.llm.kinds.wordllama.model._package_dir", lambda: tmp_path)
    with pytest.raises(ModelFileError, match="expected 64b47a2d"):
        verified_file(files.weights, files.weights_sha256)
    with pytest.raises(ModelFileError, match="is missing"):
        verified_file(files.tokenizer, files.tokenizer_sha256)


def test_the_server_speaks_openai_embeddings_and_refuses_bad_requests():
    app = EmbeddingsApp(TextEmbedder(), "wordllama-l2_supercat-256")
    status, body = app.embeddings({"input": ["a", "b c"], "model": "wordllama-l2_supercat-256"})
    assert status == 200 and [d["index"] for d in body["data"]] == [0, 1] and len(body["data"][0]["embedding"]) == 256
    assert body["usage"]["prompt_tokens"] == sum(TextEmbedder().token_counts(["a", "b c"]))
    for bad, status_code, param in [({"input": [1, 2]}, 400, "input"), ({"input": []}, 400, "input"),
                                    ({"input": "x", "encoding_format": "base64"}, 400, "encoding_format"),
                                    ({"input": "x", "model": "other"}, 404, "model"), ([], 400, None)]:
        status, body = app.embeddings(bad)
        assert status == status_code and body["error"]["param"] == param


def test_the_spec_identifies_model_dimension_and_files_and_refuses_chat_roles():
    spec = WordLlamaSpec(dim=64)
    assert spec.identity() == {"kind": "wordllama", "model": "l2_supercat", "dim": 64,
                               "weights_sha256": MODELS["l2_supercat"].weights_sha256,
                               "tokenizer_sha256": MODELS["l2_supercat"].tokenizer_sha256}
    argv = server_command(spec, "127.0.0.1", 9000, python="/env/bin/python")
    assert argv[:3] == ["/env/bin/python", "-m", "pipeline.llm.kinds.wordllama.server"]
    assert argv[argv.index("--dim") + 1] == "64" and replica_options(spec)["num_cpus"] == 0.0
    job = {"name": "j", "benchmarks": [{"benchmark": "taubench", "domain": "airline"}], "methods": [{"name": "flowstate"}],
           "agents": [{"deployment": "words"}], "deployments": {"words": {"kind": "wordllama"}}}
    with pytest.raises(ValueError, match="serves embeddings only, not chat"):
        JobConfig.model_validate(job)
    chat = {**job, "agents": [{"deployment": "llm"}], "embeddings": {"deployment": "llm"},
            "deployments": {"llm": {"kind": "llamacpp"}}}
    with pytest.raises(ValueError, match="serves chat: give it embedding: true"):
        JobConfig.model_validate(chat)


@pytest.mark.slow
def test_a_deployment_serves_embeddings_through_the_router(ray_local):
    with make_deployment(WordLlamaSpec(replicas=2, startup_timeout_s=60)) as deployment:
        embedder = deployment.embedder("episode-1")
        assert isinstance(embedder, EmbeddingClient)
        result = asyncio.run(embedder.embed(["hello there", "general kenobi"]))
        assert len(result.vectors) == 2 and len(result.vectors[0]) == 256 and result.prompt_tokens > 0
        described = deployment.describe()
        assert described["engine_version"] == "0.4.0.post1" and len(described["urls"]) == 2
        for replica in ray.get([r.describe.remote() for r in deployment.replicas]):  # servers on loopback only
            assert all_loopback(listening_addresses(replica["server_pid"])) and replica["url"].startswith("http://127.0.0.1:")
        with pytest.raises(NotImplementedError, match="serves embeddings, not chat"):
            deployment.policy("episode-1")


@pytest.mark.slow
def test_memory_methods_run_with_the_network_unreachable():
    """The server, ReasoningBank and Mem0 (import included) under a loopback-only socket guard."""
    done = subprocess.run([sys.executable, "-m", "tests.pipeline.llm.offline_memory_episode"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "FLOWSTATE_DATA": str(DATA_DIR)})
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["attempts"] == []
    assert "the user flew to Oslo in seat 3A" in summary["memories"]["mem0"]
    assert "'status': 'success'" in summary["memories"]["reasoningbank"]


@pytest.mark.slow
def test_a_replica_ray_cannot_place_is_a_clear_error_not_a_hang(ray_local, monkeypatch):
    monkeypatch.setattr("pipeline.llm.deployments.deployment._PLACEMENT_GRACE_S", 0.5)
    deployment = make_deployment(WordLlamaSpec(num_cpus=64, startup_timeout_s=1))
    with pytest.raises(DeploymentStartError, match=r"asks Ray for \{'num_cpus': 64.0\}; the cluster has \{'CPU': 4.0"):
        deployment.start()
    assert deployment.replicas == [] and deployment.router is None  # nothing left pending
