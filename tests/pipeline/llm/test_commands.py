"""Specs, server command lines and Ray resources: pure construction, no GPU and no server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError

from pipeline.llm import DeploymentSpec
from pipeline.llm.deployments import cli_flags, replica_options
from pipeline.llm.deployments.replica import bind_host
from pipeline.llm.deployments.servers import server_command, server_kind
from pipeline.llm.kinds.endpoint import EndpointSpec
from pipeline.llm.kinds.llamacpp import LlamaCppSpec, llamacpp_command, smollm2_gguf
from pipeline.llm.kinds.scripted import ScriptedSpec
from pipeline.llm.kinds.vllm import VllmSpec, vllm_command
from pipeline.llm.kinds.wordllama import WordLlamaSpec

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
    """docs/reliability-security.md (network exposure): a replica binds 127.0.0.1 unless its spec says ``host: node``."""
    assert spec.host == "127.0.0.1" and flag_value(server_command(spec, bind_host(spec.host), 8000), "--host") == "127.0.0.1"


def test_vllm_command_serves_with_cache_details_usage_and_thinking_off() -> None:
    spec = VllmSpec(model="Qwen/Qwen3-8B", tensor_parallel_size=2, served_model_name="qwen3",
                    engine_args={"max_model_len": 16384, "enforce_eager": True, "gpu_memory_utilization": 0.85})
    argv = vllm_command(spec, "10.0.0.5", 8123, python="/env/bin/python")
    assert argv[:3] == ["/env/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    assert flag_value(argv, "--model") == "Qwen/Qwen3-8B"
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
    assert cli_flags(options, dashed=True) == ["--a-b", "1", "--on", "--no-off", "--obj", '{"k":[1,2]}']
    assert cli_flags(options, dashed=False) == ["--a_b", "1", "--on", "true", "--off", "false", "--obj", '{"k":[1,2]}']


def test_llamacpp_defaults_to_the_packaged_smollm2() -> None:
    path = smollm2_gguf()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000
    assert LlamaCppSpec().gguf() == path
    assert LlamaCppSpec().served_model() == "SmolLM2-135M-Instruct.Q4_1"


# -- vLLM on GPUs and on CPUs: one builder ----------------------------------------------------------
CPU_ONLY_FLAGS = ("--enforce-eager", "--structured-outputs-config", "--no-enable-chunked-prefill")


def test_a_gpu_replica_gets_no_cpu_setting() -> None:
    """What a GPU cluster's replica runs (cannot run here): the server module, the shared defaults, the
    job's engine args, GPUs from Ray (CUDA_VISIBLE_DEVICES) and nothing added to its environment."""
    spec = VllmSpec(model="Qwen/Qwen3-8B", engine_args={"max_model_len": 65536, "gpu_memory_utilization": 0.9})
    kind = server_kind(spec)
    argv = server_command(spec, "10.0.0.5", 8000, python="/env/bin/python")
    assert argv[:3] == ["/env/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    assert not any(flag in argv for flag in CPU_ONLY_FLAGS)
    assert flag_value(argv, "--gpu-memory-utilization") == "0.9" and flag_value(argv, "--max-model-len") == "65536"
    assert kind.environment(spec, 3, [0, 1]) == {}
    assert {k: v for k, v in replica_options(spec).items() if k.startswith("num_")} == {"num_cpus": 1, "num_gpus": 1}


def test_a_cpu_replica_holds_cpus_sets_its_kv_cache_and_binds_cores_by_its_index() -> None:
    spec = VllmSpec(model="m", cpu={"threads": 2, "kv_cache_gib": 3})
    kind = server_kind(spec)
    argv = server_command(spec, "127.0.0.1", 8000, python="/env/bin/python")
    assert all(flag in argv for flag in CPU_ONLY_FLAGS)
    assert json.loads(flag_value(argv, "--structured-outputs-config")) == {"backend": "xgrammar",
                                                                            "disable_any_whitespace": True}
    assert {k: v for k, v in replica_options(spec).items() if k.startswith("num_")} == {"num_cpus": 2.0, "num_gpus": 0}
    cores = [4, 5, 6, 7, 8]
    assert [kind.environment(spec, i, cores)["VLLM_CPU_OMP_THREADS_BIND"] for i in range(3)] == ["4,5", "6,7", "4,8"]
    assert kind.environment(spec, 0, cores)["VLLM_CPU_KVCACHE_SPACE"] == "3"
    fractional = VllmSpec(model="m", cpu={"threads": 2, "num_cpus": 0.5})
    assert replica_options(fractional)["num_cpus"] == 0.5


def test_a_job_engine_arg_overrides_a_cpu_default() -> None:
    spec = VllmSpec(model="m", cpu={}, engine_args={"enforce_eager": False, "enable_chunked_prefill": True})
    argv = server_command(spec, "127.0.0.1", 8000)
    assert "--no-enforce-eager" in argv and "--enable-chunked-prefill" in argv and "--enforce-eager" not in argv


def test_the_cpu_option_enters_the_identity_only_when_set() -> None:
    """A GPU spec's identity is what it was before the CPU option existed (its ids stay); a CPU spec's
    carries the CPU defaults, since they shape outputs."""
    gpu = VllmSpec(model="Qwen/Qwen3-8B", engine_args={"max_model_len": 65536}, python=Path("/env/bin/python"),
                   router_seed=3)
    assert gpu.identity() == {"kind": "vllm", "model": "Qwen/Qwen3-8B", "engine_args": {"max_model_len": 65536}}
    assert "cpu" not in gpu.model_dump() and "router_seed" in gpu.model_dump()
    assert "cpu" not in VllmSpec(model="m").model_dump() and "python" not in VllmSpec(model="m").model_dump()
    cpu = VllmSpec(model="Qwen/Qwen3-8B", engine_args={"max_model_len": 65536}, cpu={"threads": 2})
    assert cpu.identity()["cpu"]["structured_outputs_config"]["disable_any_whitespace"] is True
    assert cpu.identity() == VllmSpec(model="Qwen/Qwen3-8B", engine_args={"max_model_len": 65536},
                                      cpu={"threads": 1, "kv_cache_gib": 4}).identity()  # threads and cache: no


def test_the_engine_python_is_the_command_and_a_relative_one_is_taken_from_the_start_directory(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    spec = VllmSpec(model="m", python=".venv-vllm/bin/python")
    assert spec.python == tmp_path / ".venv-vllm" / "bin" / "python"
    assert server_command(spec, "127.0.0.1", 1, python="/ignored/python")[0] == str(spec.python)


def test_smollm2_is_served_from_the_prepared_folder_and_nothing_else_is_renamed(tmp_path, monkeypatch) -> None:
    from pipeline.llm.errors import DeploymentStartError
    from pipeline.llm.kinds.vllm.models import MODELS_ENV_VAR, SMOLLM2_FOLDER, local_model

    monkeypatch.setenv(MODELS_ENV_VAR, str(tmp_path))
    assert local_model("Qwen/Qwen3-8B") == "Qwen/Qwen3-8B"
    with pytest.raises(DeploymentStartError, match=r"not prepared .* run scripts/setup-vllm-cpu.sh"):
        local_model("smollm2")
    (tmp_path / SMOLLM2_FOLDER).mkdir()
    with pytest.raises(DeploymentStartError):  # a folder cut short: no record of its checked files
        local_model("smollm2")
    (tmp_path / SMOLLM2_FOLDER / ".verified").write_text("")
    assert local_model("smollm2") == str(tmp_path / SMOLLM2_FOLDER)
    argv = server_command(VllmSpec(model="smollm2", cpu={}), "127.0.0.1", 1)
    assert flag_value(argv, "--model") == str(tmp_path / SMOLLM2_FOLDER) and flag_value(argv, "--served-model-name") == "smollm2"


def test_a_conversion_that_gives_other_bytes_is_refused_and_leaves_nothing(tmp_path, monkeypatch) -> None:
    """The converter is run by the engine environment's interpreter; here a stand-in interpreter that
    writes wrong files (what another transformers version could do)."""
    from pipeline.llm.errors import DeploymentStartError
    from pipeline.llm.kinds.vllm.models import MODELS_ENV_VAR, prepare_smollm2

    monkeypatch.setenv(MODELS_ENV_VAR, str(tmp_path / "models"))
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\nfor f in model.safetensors config.json tokenizer.json chat_template.jinja; do '
                    'echo wrong > "$3/$f"; done\n')
    fake.chmod(0o755)
    with pytest.raises(DeploymentStartError, match="other bytes than pinned in model.safetensors, config.json"):
        prepare_smollm2(fake)
    assert list((tmp_path / "models").iterdir()) == []
    fake.write_text("#!/bin/sh\necho 'No module named torch' >&2\nexit 1\n")
    with pytest.raises(DeploymentStartError, match="No module named torch"):
        prepare_smollm2(fake)


def test_which_cpus_vllm_cpu_can_run_on() -> None:
    from pipeline.llm.kinds.vllm.cpu_setup import cpu_unsupported

    assert cpu_unsupported("x86_64", "flags\t\t: fpu sse avx avx2 fma avx512f\n") is None
    assert cpu_unsupported("x86_64", "flags\t\t: fpu sse avx avx2 fma\n") is None
    assert "lacks AVX2" in cpu_unsupported("x86_64", "flags\t\t: fpu sse avx\n")
    assert "x86_64 only" in cpu_unsupported("aarch64", "")


def test_the_engine_distribution_is_read_from_the_engines_own_environment() -> None:
    import importlib.metadata
    import sys

    from pipeline.llm.deployments.replica import installed_engine

    assert installed_engine(sys.executable, ("vllm-cpu-not-here", "llama-cpp-python")) == (
        "llama-cpp-python", importlib.metadata.version("llama-cpp-python"))
    assert installed_engine(sys.executable, ("no-such-distribution",)) is None
