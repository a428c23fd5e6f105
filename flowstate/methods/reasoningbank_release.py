"""ReasoningBank's released memory-extraction prompts (Apache-2.0, Google's ``google-research``
repository, folder ``ReasoningBank/``): the SWE-bench variants, which MemoryArena's port uses but
for its opening role sentence."""

from __future__ import annotations

from flowstate.data import PromptRelease, ReleasedLiteral

_INSTRUCTION = "ReasoningBank/SWE-Bench/src/minisweagent/memory/instruction.py"
LITERALS = (
    ReleasedLiteral("swebench_successful_si.txt", _INSTRUCTION, "SUCCESSFUL_SI",
            "79f659e14465b67abb7641c0cf4da992634c680059d11859b8692640851341d8"),
    ReleasedLiteral("swebench_failed_si.txt", _INSTRUCTION, "FAILED_SI",
            "f21cee62c1af5dac02d287a278b4102a459b3ce2cf6af560b982ad52cd037afa"),
)
# The repository's own LICENSE was never compared with the canonical Apache-2.0 text, so its hash
# is reported, not enforced (every source file carries the Apache-2.0 header).
RELEASE = PromptRelease(
    method="reasoningbank", repo="google-research/google-research",
    commit="5b09c22d73a9d35eb6c5d2a99b95677a45053466", literals=LITERALS,
)
