"""Model-free sweeps show their context cost: the oracle's tokens counted with SmolLM2's own tokenizer
and chat template (``analysis.count_tokens``), labelled as counted, never part of an id."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml

from flowstate import ChatMessage, Completion, TokenUsage
from pipeline.cli.main import main
from pipeline.config.job import load_job
from pipeline.config.sweep import expand
from pipeline.llm.counting import CountingPolicy, TokenizerError, chat_tokenizer
from pipeline.run.launch import run_sweep
from tests.pipeline.llm.llamacpp import require_llamacpp
from tests.pipeline.run.test_run import table, write_job

MESSAGES = [ChatMessage(role="system", content="You are terse."), ChatMessage(role="user", content="Say hi.")]


class Fixed:
    """TEST FIXTURE: a policy answering one text, with or without usage."""

    def __init__(self, usage: TokenUsage | None = None) -> None:
        self.usage = usage

    async def complete(self, messages, *, json_schema=None) -> Completion:
        return Completion(text="Hello there.", usage=self.usage or TokenUsage(), model="fixture")


def test_a_fixtures_calls_are_counted_and_served_counts_pass_unchanged() -> None:
    require_llamacpp()
    tokenizer = chat_tokenizer("smollm2")
    ids = tokenizer.prompt_ids(MESSAGES)
    assert ids[0] == 1 and len(ids) == 22  # <|im_start|>system\n ... <|im_start|>assistant\n, as the server builds it
    counted = asyncio.run(CountingPolicy(Fixed(), tokenizer).complete(MESSAGES))
    assert counted.usage == TokenUsage(prompt_tokens=len(ids), completion_tokens=tokenizer.count("Hello there."),
                                       counted=True)
    served = TokenUsage(prompt_tokens=99, completion_tokens=3)
    assert asyncio.run(CountingPolicy(Fixed(served), tokenizer).complete(MESSAGES)).usage == served
    with pytest.raises(TokenizerError, match="no GGUF file"):
        chat_tokenizer("/nowhere/model.gguf")


@pytest.mark.slow
def test_the_oracle_sweep_counts_its_tokens_without_changing_an_id(ray_local, tmp_path: Path) -> None:
    require_llamacpp()
    plain = write_job(tmp_path, agent_deployment={"kind": "scripted", "name": "oracle"}, name="counted", tasks=2)
    job = yaml.safe_load(plain.read_text())
    job["analysis"] = {"baseline": "full_context-json", "count_tokens": "smollm2"}
    counted = tmp_path / "counted-job.yaml"
    counted.write_text(yaml.safe_dump(job))
    assert expand(load_job(counted)).by_id.keys() == expand(load_job(plain)).by_id.keys()
    result = run_sweep(counted, out=tmp_path / "runs")
    assert (result.completed, result.failed) == (8, 0)
    episodes = table(result.sweep_dir, "episodes", "bool_and(tokens_counted), min(tokens), "
                                                   "bool_and(tokens = agent_prompt_tokens + agent_completion_tokens)")
    assert episodes[0][0] is True and episodes[0][1] > 0 and episodes[0][2]
    # every agent call's prompt tokens are the tokenizer's count of the prompt it stored
    tokenizer = chat_tokenizer("smollm2")
    for prompt_json, prompt_tokens, flag in table(result.sweep_dir, "messages",
                                                  "prompt_json, prompt_tokens, tokens_counted")[:12]:
        messages = [ChatMessage(**m) for m in json.loads(prompt_json)]
        assert (prompt_tokens, flag) == (len(tokenizer.prompt_ids(messages)), True)
    report = result.sweep_dir / "report.md"
    assert main(["report", str(result.sweep_dir), "--out", str(report)]) == 0
    text = report.read_text()
    assert "†" in text and "counted with the job's tokenizer" in text
    # the cost table prices the counted tokens with the llama.cpp defaults measured here
    cost = text.split("## Cost\n", 1)[1].split("\n## ", 1)[0]
    assert "llama.cpp defaults measured for SmolLM2-135M" in cost
    rows = [line for line in cost.splitlines() if line.startswith("| taubench |")]
    assert len(rows) == 4 and all(line.split("|")[9].strip() not in ("", "–") for line in rows)


def test_a_tokenizer_that_is_not_there_stops_the_sweep_at_its_start(ray_local, tmp_path: Path) -> None:
    plain = write_job(tmp_path, agent_deployment={"kind": "scripted", "name": "oracle"}, name="nocount", tasks=1)
    job = yaml.safe_load(plain.read_text())
    job["analysis"] = {"count_tokens": str(tmp_path / "missing.gguf")}
    path = tmp_path / "nocount-job.yaml"
    path.write_text(yaml.safe_dump(job))
    with pytest.raises(TokenizerError, match="no GGUF file"):
        run_sweep(path, out=tmp_path / "runs")
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("episodes/**/*.parquet"))
