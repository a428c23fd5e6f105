"""A deterministic user for tests and oracle runs — a TEST FIXTURE, not a benchmark user."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pipeline.benchmarks.taubench.tasks import Task
from pipeline.benchmarks.transcript import TranscriptMessage

_CONFIRMATION = re.compile(
    r"\b(confirm|proceed|go ahead|yes|shall i|should i|do you want|would you like|is that (right|correct))\b",
    re.IGNORECASE,
)


class ScriptedUser:
    """TEST FIXTURE: a scripted, LLM-free user simulator for tests and oracle-agent runs.

    It states the reason for the call and the known info first, answers a confirmation question
    with "yes" and any other question with everything the task says it knows, and sends
    ``###STOP###`` as soon as the agent answers with a statement (its final confirmation) or
    after ``max_turns`` user messages. It never sends an empty message, so it can end an episode
    only with ``user_stop``: whether the task passes depends on the agent alone. Benchmark
    scores must come from :class:`~pipeline.benchmarks.taubench.user_simulator.LLMUserSimulator`.
    """

    def __init__(self, task: Task, *, max_turns: int = 8) -> None:
        self.task = task
        self.max_turns = max_turns
        instructions = task.user_scenario.instructions
        self._known = instructions.known_info or "I have no other details."
        self._opening = f"Hi. {instructions.reason_for_call} {self._known}"
        self._details = f"{self._known} {instructions.task_instructions}"

    async def reply(self, transcript: Sequence[TranscriptMessage]) -> str:
        turns = sum(message.role == "user" for message in transcript)
        if turns == 0:
            return self._opening
        agent_texts = [m.content for m in transcript if m.role == "assistant" and not m.tool_calls and m.content]
        last = agent_texts[-1].strip() if agent_texts else ""
        if turns >= self.max_turns or not last.endswith("?"):
            return "Thank you, that is all I needed. ###STOP###"
        if _CONFIRMATION.search(last):
            return "Yes, please go ahead."
        return self._details
