"""The registry behind ``kind: scripted``: deterministic in-process policies, by name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flowstate.chat import Policy

# (session id, role, context) -> a policy for that conversation. ``context`` is whatever the caller
# of Deployment.policy passes; the sweep pipeline passes the episode (a fixture may need its task).
ScriptedFactory = Callable[[str, str, Any], Policy]

# Filled by the modules that define fixture policies, in every process that runs episodes (an
# actor imports them before it asks for a policy): a registry is per process.
SCRIPTED_POLICIES: dict[str, ScriptedFactory] = {}


def scripted_factory(name: str) -> ScriptedFactory:
    try:
        return SCRIPTED_POLICIES[name]
    except KeyError:
        known = ", ".join(sorted(SCRIPTED_POLICIES)) or "none"
        raise KeyError(f"no scripted policy {name!r} registered in this process (registered: {known})") from None
