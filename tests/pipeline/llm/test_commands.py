"""Specs, server command lines and Ray resources: pure construction, no GPU and no server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError

from pipeline.llm import DeploymentSpec, EndpointSpec, LlamaCppSpec, ScriptedSpec, VllmSpec
from pipeline.llm.deployments import (
    WordLlamaSpec,
    cli_flags,
    llamacpp_command,
    replica_options,
    smollm2_gguf,
    vllm_command,
)
from pipeline.llm.deployments.commands import server_command
from pipeline.llm.deployments.replica import bind_host

SPEC = TypeAdapter(DeploymentSpec)


def flag_value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_specs_are_a_union_discriminated_on_kind() -> None:
    assert isinstance(SPEC.validate_python({"kind": "vllm", "model": "Qwen/Qwen3-8B"}), VllmSpec)
    assert isinstance(SPEC.validate_python({"kind": "llamacpp", "replicas": 2}), LlamaCppSpec)
    assert isinstance(SPEC.validate_python({"kind": "scripted", "name": "fixture"}), ScriptedSpec)
    endpoint = SPEC.validate_python({"kind": "endpoint", "base_url": "http://h/v1", "model": "m",
                                     "api_key_env": "OPENAI_API_KEY", "engine": "openai"})
    assert isinstance(endpoint, EndpointSpec)


@pytest.mark.parametrize("data", [
    {"kind": "vllm", "model": "m", "tensor_parallel": 2},  # misspelt field
    {"kind": "llamacpp", "replicas": 0},
    {"kind": "sglang", "model": "m"},
    {"kind": "endpoint", "base_url": "http://h/v1", "model": "m", "api_key": "sk-..."},  # keys never inline
])
def test_bad_specs_are_rejected(data: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        SPEC.validate_python(data)


@pytest.mark.parametrize("spec", [VllmSpec(model="m"), LlamaCppSpec(model_path=Path("m.gguf")), WordLlamaSpec()],
                         ids=["vllm", "llamacpp", "wordllama"])
def test_every_server_binds_loopback_unless_the_job_says_node(spec) -> None:
    """README "Secrets and network exposure": a replica binds 127.0.0.1 unless its spec says ``host: node``."""
    assert spec.host == "127.0.0.1" and flag_value(server_command(spec, bind_host(spec.host), 8000), "--host") == "127.0.0.1"


def test_vllm_command_serves_with_cache_details_usage_and_thinking_off() -> None:
    spec = VllmSpec(model="Qwen/Qwen3-8B", tensor_parallel_size=2, served_model_name="qwen3",
                    engine_args={"max_model_len": 16384, "enforce_eager": True, "gpu_memory_utilization": 0.85})
    argv = vllm_command(spec, "10.0.0.5", 8123, python="/env/bin/python")
    assert argv[:3] == ["/env/bin/vllm", "serve", "Qwen/Qwen3-8B"]
    assert flag_value(argv, "--host") == "10.0.0.5" and flag_value(argv, "--port") == "8123"
    assert flag_value(argv, "--tensor-parallel-size") == "2"
    assert flag_value(argv, "--served-model-name") == "qwen3"
    for flag in ("--enable-prefix-caching", "--enable-prompt-tokens-details", "--enable-force-include-usage",
                 "--enforce-eager"):
        assert flag in argv
    assert json.loads(flag_value(argv, "--default-chat-template-kwargs")) == {"enable_thinking": False}
    assert flag_value(argv, "--max-model-len") == "16384"
    assert flag_value(argv, "--gpu-memory-utilization") == "0.85"
    assert flag_value(argv, "--distributed-executor-backend") == "mp"


def test_vllm_job_engine_args_override_the_defaults() -> None:
    spec = VllmSpec(model="m", engine_args={"enable_prefix_caching": False,
                                            "default_chat_template_kwargs": {"enable_thinking": True}})
    argv = vllm_command(spec, "127.0.0.1", 1, python="/p/python")
    assert "--no-enable-prefix-caching" in argv and "--enable-prefix-caching" not in argv
    assert json.loads(flag_value(argv, "--default-chat-template-kwargs")) == {"enable_thinking": True}
    assert flag_value(argv, "--served-model-name") == "m"
    assert "--distributed-executor-backend" not in argv  # one GPU: nothing to distribute


def test_vllm_replicas_reserve_their_gpus_and_spread() -> None:
    options = replica_options(VllmSpec(model="m", tensor_parallel_size=4))
    assert options["num_gpus"] == 4
    assert options["scheduling_strategy"] == "SPREAD"
    assert options["max_restarts"] == 0


def test_llamacpp_command_and_cpus() -> None:
    spec = LlamaCppSpec(model_path=Path("/models/x.gguf"), n_threads=3, server_args={"n_batch": 256, "verbose": True})
    argv = llamacpp_command(spec, "127.0.0.1", 9000, python="/env/bin/python")
    assert argv[:3] == ["/env/bin/python", "-m", "llama_cpp.server"]
    assert flag_value(argv, "--model") == "/models/x.gguf"
    assert flag_value(argv, "--model_alias") == "x"
    assert flag_value(argv, "--n_ctx") == "8192" and flag_value(argv, "--n_threads") == "3"
    assert flag_value(argv, "--use_mmap") == "false"
    assert flag_value(argv, "--n_batch") == "256" and flag_value(argv, "--verbose") == "true"
    assert replica_options(spec)["num_cpus"] == 3
    assert replica_options(spec.model_copy(update={"num_cpus": 0.5}))["num_cpus"] == 0.5


def test_cli_flag_styles() -> None:
    options = {"a_b": 1, "on": True, "off": False, "obj": {"k": [1, 2]}}
    assert cli_flags(options, "vllm") == ["--a-b", "1", "--on", "--no-off", "--obj", '{"k":[1,2]}']
    assert cli_flags(options, "llamacpp") == ["--a_b", "1", "--on", "true", "--off", "false", "--obj", '{"k":[1,2]}']


def test_llamacpp_defaults_to_the_packaged_smollm2() -> None:
    path = smollm2_gguf()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000
    assert LlamaCppSpec().gguf() == path
    assert LlamaCppSpec().served_model() == "SmolLM2-135M-Instruct.Q4_1"
