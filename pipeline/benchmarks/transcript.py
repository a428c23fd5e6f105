"""The conversation of one episode as the benchmark saw it: what grading and re-grading read.

Messages follow the OpenAI / τ-bench shape (role, content, tool calls, tool results) so that a
stored transcript can be re-graded without re-simulating and exported to upstream formats.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class TranscriptToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    name: str
    arguments: Any


class TranscriptMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["assistant", "user", "tool"]
    content: str | None = None
    tool_calls: list[TranscriptToolCall] | None = None
    # For role == "tool": the call this result answers, and whether the tool failed.
    tool_call_id: str | None = None
    error: bool = False
    # The request (1-based, as the agent loop numbers them) during which the message was produced; 0 for the greeting.
    request: int = 0
