"""The default prompt bytes of FlowState and Full Context, against values recorded before the refactor
into plug-ins (tests/golden/): every prompt of a multi-request replay, in both protocols."""

from __future__ import annotations

import asyncio
import hashlib
import json

import pytest

from flowstate import Completion, RequestEnd, StepRunner, TaskPrompt, ToolResult, Trace, new_session
from tests.conftest import REPO_ROOT

GOLDEN = json.loads((REPO_ROOT / "tests" / "golden" / "trace_prompts.json").read_text())


async def _prompt_digest(trace: Trace, method: str, protocol: str) -> str:
    session = new_session({"name": method, "protocol": protocol}, TaskPrompt(task_policy="POLICY", available_tools="TOOLS"),
                          ["search", "book"])
    runner = StepRunner(session)
    digest = hashlib.sha256()
    for request in trace.requests:
        await runner.begin_request(request.query)
        observation = None
        for step in request.steps:
            messages = await runner.prompt(observation)
            digest.update(json.dumps([m.model_dump() for m in messages], ensure_ascii=False).encode())
            record, parsed = await runner.record_output(messages, Completion(text=step.completion))
            observation = None
            if parsed.tool_calls and step.observation is not None:
                observation = await runner.record_observation(record, [ToolResult(content=step.observation)])
        await runner.end_request(RequestEnd.RESPONSE, None)
    return digest.hexdigest()


@pytest.mark.parametrize("key", sorted(GOLDEN))
def test_prompt_bytes_are_unchanged(key: str) -> None:
    name, method, protocol = key.split("/")
    trace = Trace.model_validate(json.loads((REPO_ROOT / "jobs" / "traces" / f"{name}.json").read_text()))
    assert asyncio.run(_prompt_digest(trace, method, protocol)) == GOLDEN[key]
