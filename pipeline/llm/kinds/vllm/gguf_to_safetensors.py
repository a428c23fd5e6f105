"""Converts a llama.cpp GGUF into a folder vLLM loads (bf16 safetensors, tokenizer, chat template).

Run by the engine environment's interpreter, which has torch and transformers (with ``gguf``):
``python gguf_to_safetensors.py MODEL.gguf OUT_DIR``. It imports nothing of this project, which that
environment does not have. vLLM 0.32 loads no GGUF by itself; transformers dequantizes one, but
refuses to save a model loaded from GGUF, so the weights are copied into a plain model of the same
configuration first, and the GGUF's quantization entry is dropped from the saved configuration.
"""

from __future__ import annotations

import sys
from pathlib import Path


def convert(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.bfloat16)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    plain.load_state_dict(loaded.state_dict())
    plain.save_pretrained(out)
    tokenizer.save_pretrained(out)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python gguf_to_safetensors.py MODEL.gguf OUT_DIR")
    convert(Path(sys.argv[1]), Path(sys.argv[2]))
