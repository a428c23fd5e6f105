"""Closing a caller: an HTTP conversation frees its routing slot; a scripted caller has nothing to close."""

from __future__ import annotations


async def aclose_caller(caller: object) -> None:
    """Close an HTTP caller's conversation (frees its routing slot); fixtures have nothing to close."""
    close = getattr(caller, "aclose", None)
    if close is not None:
        await close()


