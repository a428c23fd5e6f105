"""Embeddings over OpenAI's /v1/embeddings: the client against the real HTTP stand-in server, the
deployments that serve them, and the server flags that switch llama.cpp and vLLM into that mode."""

from __future__ import annotations

import asyncio
import math

import pytest

from flowstate import Embedder
from pipeline.llm import ClientSettings, EmbeddingClient, ModelUnavailableError, RetryPolicy, make_deployment
from pipeline.llm.kinds.endpoint import EndpointSpec
from pipeline.llm.kinds.llamacpp import LlamaCppSpec, llamacpp_command
from pipeline.llm.kinds.replica_sim.server import StubServer
from pipeline.llm.kinds.scripted import ScriptedSpec
from pipeline.llm.kinds.vllm import VllmSpec, vllm_command

FAST = ClientSettings(timeout_s=5.0, retry=RetryPolicy(max_attempts=2, initial_backoff_s=0.01, max_backoff_s=0.02))


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / (math.hypot(*a) * math.hypot(*b))


def test_vectors_come_back_in_input_order_with_their_tokens(stub: StubServer) -> None:
    client = EmbeddingClient(stub.url, "embed-model", settings=FAST, conversation="episode/embeddings")
    assert isinstance(client, Embedder)
    texts = ["book a flight to paris", "a flight to paris please", "the cat sat on the mat"]
    result = asyncio.run(client.embed(texts))
    assert len(result.vectors) == 3 and all(len(v) == stub.embedding_dims for v in result.vectors)
    assert result.prompt_tokens == 5 + 5 + 6 and result.latency_s > 0
    assert cosine(result.vectors[0], result.vectors[1]) > cosine(result.vectors[0], result.vectors[2])
    assert stub.requests[-1] == {"model": "embed-model", "input": texts, "user": "episode/embeddings"}
    assert asyncio.run(client.embed([])).vectors == []  # nothing to send: no request
    assert len(stub.requests) == 1


def test_embedding_calls_are_retried_then_reported_like_chat_calls(stub: StubServer) -> None:
    client = EmbeddingClient(stub.url, "embed-model", settings=FAST)
    stub.inject("status", status=503, times=1)
    assert len(asyncio.run(client.embed(["once more"])).vectors) == 1
    stub.inject("status", status=500)
    with pytest.raises(ModelUnavailableError, match="no usable reply after 2 attempts"):
        asyncio.run(client.embed(["down"]))


def test_an_endpoint_deployment_serves_embeddings_and_a_chat_only_one_says_so(stub: StubServer) -> None:
    with make_deployment(EndpointSpec(base_url=stub.url, model="stub", client=FAST)) as deployment:
        embedder = deployment.embedder("episode-1")
        assert len(asyncio.run(embedder.embed(["hello"])).vectors[0]) == stub.embedding_dims
    with pytest.raises(NotImplementedError, match="scripted deployment does not serve embeddings"):
        make_deployment(ScriptedSpec(name="oracle")).embedder("episode-1")


def test_server_flags_for_embeddings() -> None:
    llama = llamacpp_command(LlamaCppSpec(model_path="/m.gguf", embedding=True), "127.0.0.1", 8000)
    assert llama[llama.index("--embedding") + 1] == "true"
    assert "--embedding" not in llamacpp_command(LlamaCppSpec(model_path="/m.gguf"), "127.0.0.1", 8000)
    vllm = vllm_command(VllmSpec(model="BAAI/bge-m3", embedding=True), "0.0.0.0", 8000)
    assert vllm[vllm.index("--runner") + 1] == "pooling" and "--enable-prompt-tokens-details" not in vllm
    # an unset embedding flag leaves the spec's dump (and every id built from it) as it was
    assert "embedding" not in LlamaCppSpec().model_dump() and LlamaCppSpec(embedding=True).identity()["embedding"]
