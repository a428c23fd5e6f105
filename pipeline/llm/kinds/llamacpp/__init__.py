"""``kind: llamacpp``: llama-cpp-python's OpenAI server on CPUs, the embedded default (SmolLM2-135M).

Registers the kind and the GGUF tokenizers (``smollm2``, any ``.gguf`` file) that count the tokens of
calls no server counts.
"""

from pipeline.llm.counting import TOKENIZERS, TokenizerSource
from pipeline.llm.deployments import ReplicatedDeployment, register_deployment_kind
from pipeline.llm.engines import OPENAI_SAMPLING, EngineProfile
from pipeline.llm.kinds.llamacpp.command import LLAMACPP_SERVER, llamacpp_command
from pipeline.llm.kinds.llamacpp.model import MissingGgufError, smollm2_gguf
from pipeline.llm.kinds.llamacpp.spec import SMOLLM2_MEASURED, LlamaCppSpec
from pipeline.llm.kinds.llamacpp.tokenizer import gguf_tokenizer, smollm2_tokenizer

# JSON schemas as a JSON object with the schema beside it (the form it enforces); its own names for the
# sampling settings beyond OpenAI's; no cached-token figures, so the client estimates them.
LLAMACPP = EngineProfile(name="llamacpp", endpoint=True, response_format="json_object",
                         sampling_names={**OPENAI_SAMPLING, "top_k": "top_k", "min_p": "min_p",
                                         "repetition_penalty": "repeat_penalty"},
                         estimates_cached_prefix=True)

register_deployment_kind(LlamaCppSpec, ReplicatedDeployment, LLAMACPP, LLAMACPP_SERVER)
TOKENIZERS.register("smollm2", TokenizerSource(smollm2_tokenizer, SMOLLM2_MEASURED))
TOKENIZERS.register(".gguf", TokenizerSource(gguf_tokenizer))

__all__ = ["LLAMACPP", "LlamaCppSpec", "MissingGgufError", "llamacpp_command", "smollm2_gguf"]
