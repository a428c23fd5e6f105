"""Endpoint and scripted deployments, and start-up failures of replicated ones."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from flowstate.chat import ChatMessage, Completion
from pipeline.llm import (
    SCRIPTED_POLICIES,
    ChatClient,
    DeploymentStartError,
    SamplingParams,
    SchemaNotEnforcedError,
    make_deployment,
    verify_schema_enforcement,
)
from pipeline.llm.kinds.endpoint import EndpointSpec
from pipeline.llm.kinds.llamacpp import LlamaCppSpec
from pipeline.llm.kinds.replica_sim.server import StubServer
from pipeline.llm.kinds.scripted import ScriptedSpec
from pipeline.llm.kinds.vllm import VLLM
from tests.pipeline.llm.llamacpp import require_llamacpp

HELLO = [ChatMessage(role="user", content="hello")]


class Parrot:
    """A deterministic fixture policy: says who it is."""

    def __init__(self, session_id: str, role: str, context: Any) -> None:
        self.label = f"{session_id}/{role}/{context}"

    async def complete(
        self, messages: Sequence[ChatMessage], *, json_schema: Mapping[str, Any] | None = None
    ) -> Completion:
        return Completion(text=self.label)


@pytest.fixture
def parrot() -> str:
    SCRIPTED_POLICIES.register("parrot", Parrot)
    return "parrot"


def test_scripted_deployment_resolves_registered_policies(parrot: str) -> None:
    deployment = make_deployment(ScriptedSpec(name=parrot))
    with deployment:
        completion = asyncio.run(deployment.policy("ep-1", "user", context="task-7").complete(HELLO))
    assert completion.text == "ep-1/user/task-7"
    assert deployment.describe()["model"] == "parrot"


def test_scripted_deployment_fails_at_start_for_an_unknown_name(parrot: str) -> None:
    with pytest.raises(KeyError, match="'nobody' is registered.*known:.*parrot"):
        make_deployment(ScriptedSpec(name="nobody")).start()


def test_endpoint_deployment_checks_the_server_and_serves_policies(stub: StubServer) -> None:
    deployment = make_deployment(EndpointSpec(base_url=stub.url, model="stub-model", engine="vllm"))
    assert deployment.start() == [stub.url]
    policy = deployment.policy("ep-1")
    assert isinstance(policy, ChatClient) and policy.profile.name == "vllm"
    assert asyncio.run(policy.complete(HELLO)).text == "echo: hello"
    assert stub.requests[-1]["max_tokens"] == 1024  # the spec's sampling...
    asyncio.run(deployment.policy("ep-1", "judge", SamplingParams(max_tokens=7)).complete(HELLO))
    assert stub.requests[-1]["max_tokens"] == 7  # ...unless the model use brings its own
    described = deployment.describe()
    assert (described["kind"], described["model"], described["base_url"]) == ("endpoint", "stub-model", stub.url)


def test_endpoint_deployment_that_never_answers_fails_to_start() -> None:
    with StubServer() as gone:
        url = gone.url
    with pytest.raises(DeploymentStartError, match="not ready after"):
        make_deployment(EndpointSpec(base_url=url, model="m", startup_timeout_s=0.5)).start()


async def _structured(messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
    return '{"answer": "yes"}' if "response_format" in body else "Hello there!"


def test_schema_check_passes_only_when_the_reply_follows_the_schema(stub: StubServer) -> None:
    stub.responder = _structured
    asyncio.run(verify_schema_enforcement(ChatClient(stub.url, "m", profile=VLLM)))
    stub.responder = lambda messages, body: _structured(messages, {})  # a server that ignores it
    with pytest.raises(SchemaNotEnforcedError, match="Hello there"):
        asyncio.run(verify_schema_enforcement(ChatClient(stub.url, "m", profile=VLLM)))


@pytest.mark.slow
def test_replica_that_dies_at_start_reports_its_log_tail(ray_local: None, tmp_path: Path) -> None:
    require_llamacpp()
    bogus = tmp_path / "not-a-model.gguf"
    bogus.write_bytes(b"this is not a GGUF file")
    deployment = make_deployment(LlamaCppSpec(model_path=bogus, n_threads=1, num_cpus=1))
    try:
        with pytest.raises(DeploymentStartError, match=r"exited with status .*log tail:(.|\n)*not-a-model"):
            deployment.start()
        assert deployment.replicas == [] and deployment.router is None  # start() cleaned up
    finally:
        deployment.stop()


@pytest.mark.slow
def test_replica_that_is_not_ready_by_the_deadline_fails(ray_local: None) -> None:
    require_llamacpp()
    deployment = make_deployment(LlamaCppSpec(n_threads=1, num_cpus=1, startup_timeout_s=0.2))
    try:
        with pytest.raises(DeploymentStartError, match="not ready after"):
            deployment.start()
    finally:
        deployment.stop()
