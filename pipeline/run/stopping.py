"""How ``flowstate run`` stops: Ctrl-C (SIGINT) and SIGTERM (``kill``, ``ray job stop``, Kubernetes,
SLURM) alike, whenever they arrive: finished episodes kept, servers stopped, the run recorded.

The handler raises ``KeyboardInterrupt`` where the driver is (a blocking wait included) and sets
:data:`STOP_REQUESTED`, which the driver checks at its safe points, so a stop is never lost when
library code swallows the exception (DuckDB turns it into "Query interrupted"). ``ray.init``
installs its own SIGTERM handler (``sys.exit``, which skips the sweep's cleanup):
:func:`keeping_stop_handlers` puts ours back, and a SIGTERM that Ray's handler met meanwhile is a
stop like any other. A run that stopped exits with ``128 + signal``: 130 after Ctrl-C, 143 after
SIGTERM (:func:`stop_status`).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
STOP_REQUESTED = threading.Event()
_first_signal: int = signal.SIGINT  # the signal that asked first, for the exit status


def request_stop(signum: int, frame: Any) -> None:
    """Signal handler for Ctrl-C and SIGTERM: stop cleanly, keeping finished episodes."""
    _note_stop(signum)
    raise KeyboardInterrupt


def _note_stop(signum: int) -> None:
    global _first_signal
    if not STOP_REQUESTED.is_set():
        _first_signal = signum
    STOP_REQUESTED.set()


def install_stop_handlers() -> None:
    for signum in STOP_SIGNALS:
        signal.signal(signum, request_stop)


def stop_status() -> int:
    """The exit status of a run that stopped: 128 + the signal that stopped it (130 for Ctrl-C)."""
    return 128 + (_first_signal if STOP_REQUESTED.is_set() else signal.SIGINT)


def raise_if_stopping() -> None:
    """At a safe point: go no further once a stop was asked for (its ``KeyboardInterrupt`` may
    have been swallowed, or turned into another error, by library code)."""
    if STOP_REQUESTED.is_set():
        raise KeyboardInterrupt


@contextlib.contextmanager
def keeping_stop_handlers() -> Iterator[None]:
    """Around code that installs handlers of its own (``ray.init``): the handlers in place before
    are put back after it, and a SIGTERM that its handler turned into ``SystemExit`` (Ray's
    ``sys.exit(signum)``) is a stop request when ours was the handler before."""
    before = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    try:
        yield
    except SystemExit as exc:
        if exc.code != signal.SIGTERM or before[signal.SIGTERM] is not request_stop:
            raise
        _note_stop(signal.SIGTERM)
        raise KeyboardInterrupt from None
    finally:
        for signum, handler in before.items():
            if signal.getsignal(signum) is not handler:
                signal.signal(signum, handler)
