"""Typed failures of model access, so callers can tell "model down" from "request wrong".

``flowstate.chat.ContextOverflowError`` (prompt too long) is the third kind; it lives in
``flowstate`` because the loop itself handles it.
"""

from __future__ import annotations

from flowstate.errors import FlowStateError


class ModelError(FlowStateError):
    """Base of every model-access failure raised by :mod:`pipeline.llm` (the model is down, refused the
    request, or no API key is set: the user can act on each).

    ``cause`` is the last underlying exception (also chained as ``__cause__``); its text has
    already been scrubbed of the API key.
    """

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.cause = cause

    def __reduce__(self) -> tuple:
        # Crosses process boundaries (Ray) without its cause: client-library exceptions often
        # cannot be rebuilt from a pickle, and the message already names the cause.
        return (type(self), (str(self),))


class ModelUnavailableError(ModelError):
    """Retries exhausted on transport errors, timeouts, 429 or 5xx: the model is down or overloaded."""


class ModelRequestError(ModelError):
    """The server rejected the request itself (4xx other than 429 / context overflow): never retried."""


class SchemaNotEnforcedError(ModelError):
    """The server answered a JSON-schema request with output that does not satisfy the schema."""


class DeploymentStartError(FlowStateError, RuntimeError):
    """A model server died or never became healthy; the message carries its stderr tail."""
