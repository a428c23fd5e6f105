"""Faults on the model path as data: what a client saw go wrong on one attempt of one call.

The client (:mod:`pipeline.llm.client`) reports every failed attempt, retried or not, and every
completion cut at ``max_tokens``, to the sink of the current context. The episode's call log
(:mod:`pipeline.run.calls`) sets a sink around each call it records, so a fault reaches the episode's
rows with its role, request and step without widening the ``Policy`` interface; a call made
outside any sink (the driver's schema check, a benchmark script) reports to nobody.

Kinds (``http_status`` is the server's status for the first four, 200 for ``length``):

- ``server_error``: a 5xx answer; retried.
- ``rate_limited``: a 429; retried after the server's ``Retry-After`` (capped at the longest backoff).
- ``http_error``: any other non-2xx but a context overflow: 408 and 409 retried, the rest raised at once.
- ``context_overflow``: the prompt does not fit the context window; raised at once (the loop ends
  the request).
- ``timeout``: no complete answer within ``timeout_s``; retried.
- ``connection``: no connection, or one dropped before the reply was complete; retried.
- ``invalid_json``: a 2xx whose body is not JSON (a proxy's page, JSON cut short); retried.
- ``no_choices``: a 2xx chat reply without any choice; retried.
- ``length``: the completion ran to ``max_tokens`` (``finish_reason: length``). Not an HTTP fault but
  a model outcome: the cut text is what the episode gets (the protocol records a parse error or the
  truncated output), so it is never retried and always has ``retried = false``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Literal

from pydantic import BaseModel, ConfigDict

FaultKind = Literal["server_error", "rate_limited", "http_error", "context_overflow", "timeout", "connection",
                    "invalid_json", "no_choices", "length"]
MESSAGE_LIMIT = 500  # characters of an error text kept per fault


class FaultReport(BaseModel):
    """One attempt of one call that failed (or a completion cut at ``max_tokens``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: FaultKind
    http_status: int | None = None
    attempt: int  # of the call, from 1
    latency_s: float  # from sending the request to the fault
    message: str
    served_by: str | None = None  # the URL the attempt went to
    retried: bool  # whether the client tried again after it


FaultSink = Callable[[FaultReport], None]
_SINK: ContextVar[FaultSink | None] = ContextVar("flowstate_fault_sink", default=None)


@contextmanager
def reporting_faults(sink: FaultSink) -> Iterator[None]:
    """Faults reported in this context (and in tasks it starts) go to ``sink``."""
    token = _SINK.set(sink)
    try:
        yield
    finally:
        _SINK.reset(token)


def report_fault(report: FaultReport) -> None:
    sink = _SINK.get()
    if sink is not None:
        sink(report)
