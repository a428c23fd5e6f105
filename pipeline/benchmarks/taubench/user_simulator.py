"""The simulated customer (TOOLS.md §6.2–6.3): prompt rendering and the LLM-backed simulator.

The user LLM sees the guidelines plus the task's scenario as its system prompt and the
conversation with roles flipped (the agent's texts as ``user``, its own earlier messages as
``assistant``); tool calls and tool results are never shown to it.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from flowstate.chat import ChatMessage, Policy
from pipeline.benchmarks.taubench.data import DataDir
from pipeline.benchmarks.taubench.domains import simulation_guidelines
from pipeline.benchmarks.taubench.tasks import Task
from pipeline.benchmarks.transcript import TranscriptMessage

STOP_TOKENS = ("###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###")


def is_stop(text: str) -> bool:
    """A user message containing any stop token ends the episode (substring match)."""
    return any(token in text for token in STOP_TOKENS)


@runtime_checkable
class UserSimulator(Protocol):
    """Produces the customer's next message from the conversation so far."""

    async def reply(self, transcript: Sequence[TranscriptMessage]) -> str: ...


def _indent(text: str) -> str:
    return textwrap.indent(text, "\t")


def render_scenario(task: Task) -> str:
    """The ``<scenario>`` body: optional persona, then the indented instructions."""
    instructions = task.user_scenario.instructions
    lines = [f"Domain: {instructions.domain}", "Reason for call:\n" + _indent(instructions.reason_for_call)]
    if instructions.known_info is not None:
        lines.append("Known info:\n" + _indent(instructions.known_info))
    if instructions.unknown_info is not None:
        lines.append("Unknown info:\n" + _indent(instructions.unknown_info))
    lines.append("Task instructions:\n" + _indent(instructions.task_instructions))
    scenario = "Instructions:\n" + _indent("\n".join(lines))
    persona = task.user_scenario.persona
    if persona is not None:
        scenario = "Persona:\n" + _indent(persona) + "\n" + scenario
    return scenario


def user_system_prompt(task: Task, guidelines: str) -> str:
    return guidelines + "\n\n<scenario>\n" + render_scenario(task) + "\n</scenario>"


def user_messages(task: Task, guidelines: str, transcript: Sequence[TranscriptMessage]) -> list[ChatMessage]:
    """What the user LLM is sent: system prompt plus the role-flipped text conversation."""
    messages = [ChatMessage(role="system", content=user_system_prompt(task, guidelines))]
    for message in transcript:
        if message.role == "tool" or message.tool_calls or message.content is None:
            continue
        role = "user" if message.role == "assistant" else "assistant"
        messages.append(ChatMessage(role=role, content=message.content))
    return messages


class LLMUserSimulator:
    """The reference user simulator: one chat completion per user turn."""

    def __init__(
        self, policy: Policy, task: Task, *, guidelines: str | None = None, data_dir: DataDir = None
    ) -> None:
        self.policy = policy
        self.task = task
        self.guidelines = simulation_guidelines(data_dir) if guidelines is None else guidelines

    async def reply(self, transcript: Sequence[TranscriptMessage]) -> str:
        completion = await self.policy.complete(user_messages(self.task, self.guidelines, transcript))
        return completion.text
