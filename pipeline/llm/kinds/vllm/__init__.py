"""``kind: vllm``: vLLM's OpenAI server on Ray GPUs, or on CPUs with a CPU build of vLLM (``cpu:``).

Also here: the models it serves from this machine's cache (:mod:`.models`, ``model: smollm2``) and the
set-up steps ``scripts/setup-vllm-cpu.sh`` runs (:mod:`.cpu_setup`).
"""

from pipeline.llm.deployments import ReplicatedDeployment, register_deployment_kind
from pipeline.llm.engines import OPENAI_SAMPLING, EngineProfile
from pipeline.llm.kinds.vllm.command import VLLM_SERVER, vllm_command, vllm_environment
from pipeline.llm.kinds.vllm.spec import VllmCpu, VllmSpec

# Cached tokens in usage, /tokenize with chat messages, the thinking switch, and the sampling settings
# beyond OpenAI's under their own names.
VLLM = EngineProfile(name="vllm", endpoint=True, thinking_switch=True, tokenize_endpoint=True,
                     sampling_names={**OPENAI_SAMPLING, "top_k": "top_k", "min_p": "min_p",
                                     "repetition_penalty": "repetition_penalty"})

register_deployment_kind(VllmSpec, ReplicatedDeployment, VLLM, VLLM_SERVER)

__all__ = ["VLLM", "VllmCpu", "VllmSpec", "vllm_command", "vllm_environment"]
