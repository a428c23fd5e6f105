"""Deterministic TEST FIXTURES that jobs can name (``kind: scripted`` deployments).

They are not models and their scores say nothing about any model: they exercise the pipeline.
Importing this module registers them, in every process that imports it.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from flowstate import METHODS, ChatMessage, Completion, Policy
from flowstate.methods.reasoningbank import EXTRACTION_HEADER, JUDGE_SYSTEM
from pipeline.benchmarks.base import benchmark_of
from pipeline.llm.scripted_policies import SCRIPTED_POLICIES


def oracle_for(episode: Any) -> Policy:
    """The episode's benchmark's oracle for its task, in the episode's method protocol."""
    cell, options = episode.cell.benchmark, episode.cell.method
    return benchmark_of(cell).oracle(cell, episode.task_id, METHODS.get(options.name), options)


SCRIPTED_POLICIES.register("oracle", lambda session_id, role, episode: oracle_for(episode))


class CrashOncePolicy:
    """TEST FIXTURE: the oracle, except that the first attempt of each episode kills its own
    process on its first call (as an actor crash would); later attempts behave normally."""

    def __init__(self, episode: Any) -> None:
        self.inner = oracle_for(episode)
        self.marker = Path(tempfile.gettempdir()) / f"flowstate-crash-once-{episode.episode_id}"

    async def complete(self, messages: Sequence[ChatMessage], *, json_schema: Any = None) -> Completion:
        if not self.marker.exists():
            self.marker.touch()
            os._exit(1)
        return await self.inner.complete(messages, json_schema=json_schema)


SCRIPTED_POLICIES.register("crash-once", lambda session_id, role, episode: CrashOncePolicy(episode))


class UnchangedStatePolicy:
    """TEST FIXTURE: the memory model of every method under the oracle (which needs no memory),
    answering each method's call in its expected form from what it was given: ZipAct's updater gets
    the previous state back unchanged; ReasoningBank's judge hears ``success`` and its extractor
    returns one memory item titled with the entry's first line; Mem0's extraction returns the new
    user message's first line as the one memory."""

    async def complete(self, messages: Sequence[ChatMessage], *, json_schema: Any = None) -> Completion:
        system, user = messages[0].content, messages[-1].content
        if "```json\n" in user:
            previous = user.split("```json\n", 1)[1].split("\n```", 1)[0]
            text = f"```json\n{previous}\n```"
        elif "## New Messages\nuser: " in user:
            first = user.split("## New Messages\nuser: ", 1)[1].split("\n", 1)[0][:200]
            text = json.dumps({"memory": [{"id": "0", "text": first, "attributed_to": "user"}]})
        elif user.startswith(EXTRACTION_HEADER):
            first = user[len(EXTRACTION_HEADER):].split("\n", 1)[0][:200]
            text = f"# Memory Item 1\n## Title {first}\n## Description Seen before.\n## Content {first}"
        elif system == JUDGE_SYSTEM:
            text = "success"
        else:
            raise ValueError(f"the memory fixture does not know this call (system prompt {system[:60]!r})")
        return Completion(text=text, model="unchanged-state-fixture", finish_reason="stop")


SCRIPTED_POLICIES.register("unchanged-state", lambda session_id, role, episode: UnchangedStatePolicy())
