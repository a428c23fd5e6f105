"""The one root of the errors a user can act on."""

from __future__ import annotations


class FlowStateError(Exception):
    """An error the user can act on (bad input, missing data, a refused option): the CLI prints it as
    one line and exits 2; anything else is a bug and prints a traceback.

    Subclasses keep a builtin second base where callers catch them by it (``KeyError`` for an
    unknown plug-in name, ``ValueError`` for a bad trace, ``RuntimeError`` for missing data)."""
