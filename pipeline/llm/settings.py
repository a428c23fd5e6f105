"""Client-side knobs shared by every deployment kind: sampling, timeouts, retries."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class SamplingParams(BaseModel):
    """Sent with every request; ``extra_body`` carries engine extras such as vLLM's
    ``{"chat_template_kwargs": {"enable_thinking": False}}`` or llama.cpp's ``top_k``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float | None = 0.0
    top_p: float | None = None
    max_tokens: int | None = Field(default=1024, gt=0)
    seed: int | None = None
    extra_body: dict[str, Any] = {}


class RetryPolicy(BaseModel):
    """Exponential backoff with jitter: attempt ``i`` sleeps ``min(max, initial * 2**i)``,
    shortened by up to ``jitter`` of itself so that many clients do not retry in lockstep."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_attempts: int = Field(default=5, ge=1)
    initial_backoff_s: float = Field(default=0.5, ge=0)
    max_backoff_s: float = Field(default=10.0, ge=0)
    jitter: float = Field(default=0.5, ge=0, le=1)


class ClientSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # Wall-clock limit of one HTTP attempt (queueing inside the server included, so a serial
    # llama.cpp server with several callers needs a generous value).
    timeout_s: float = Field(default=120.0, gt=0)
    retry: RetryPolicy = RetryPolicy()
    # Requests in flight per deployment per process (one asyncio semaphore each).
    max_in_flight: int = Field(default=64, ge=1)
    # OpenAI-style ``strict`` flag of json_schema response formats.
    strict_json_schema: bool = True
