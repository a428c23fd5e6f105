"""The model layer's plug-in shape: one folder per deployment kind, found through its entry point; engine
differences as registered profiles."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from importlib import metadata

import grimp
import pytest
from pydantic import TypeAdapter, ValidationError

from flowstate import ChatMessage
from flowstate.registry import ENTRY_POINT_GROUP
from pipeline.llm import ENGINE_PROFILES, DeploymentSpec, EngineProfile, make_deployment
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
