"""Is a model server up: readiness at start-up (blocking), liveness for the router (async).

httpx is imported where it is used: every episode actor imports this module with the
deployments and never checks a server (a tenth of a second of start-up per process).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from pipeline.llm.errors import DeploymentStartError


def wait_until_ready(
    base_url: str,
    deadline_s: float,
    exited: Callable[[], int | None],
    log_tail: Callable[[], str],
    api_key_env: str | None = None,
) -> float:
    """Poll ``GET {base_url}/models`` until it answers 200; return the seconds it took.

    ``exited()`` returns the server's exit status once it has died: then, or at the deadline,
    raise :class:`DeploymentStartError` with the server's log tail.
    """
    import httpx

    started = time.monotonic()
    key = os.environ.get(api_key_env, "") if api_key_env else ""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with httpx.Client(timeout=2.0, headers=headers) as http:
        while True:
            status = exited()
            if status is not None:
                raise DeploymentStartError(
                    f"model server at {base_url} exited with status {status} while starting; "
                    f"log tail:\n{log_tail()}"
                )
            try:
                if http.get(f"{base_url}/models").status_code == 200:
                    return time.monotonic() - started
            except httpx.HTTPError:
                pass
            if time.monotonic() - started > deadline_s:
                raise DeploymentStartError(
                    f"model server at {base_url} not ready after {deadline_s:.0f} s; log tail:\n{log_tail()}"
                )
            time.sleep(0.2)


async def is_alive(url: str, timeout_s: float = 5.0) -> bool:
    """Any HTTP answer below 500 from ``url`` within the timeout counts as alive."""
    import httpx

    try:
        async with httpx.AsyncClient(timeout=timeout_s) as http:
            return (await http.get(url)).status_code < 500
    except httpx.HTTPError:
        return False
