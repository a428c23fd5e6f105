"""Scripted policies by name: deterministic in-process policies (TEST FIXTURES) that deployments name.

``kind: scripted`` serves one as the model; ``kind: replica_sim`` has one write what its simulated
replicas generate. Plug-in modules register them in every process that imports them (the built-in
ones: :mod:`pipeline.run.scripted_policies`, an entry point like any plug-in).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flowstate.chat import Policy
from flowstate.registry import Registry

# (session id, role, context) -> a policy for that conversation. ``context`` is whatever the caller
# of Deployment.policy passes; the sweep pipeline passes the episode (a fixture may need its task).
ScriptedFactory = Callable[[str, str, Any], Policy]

SCRIPTED_POLICIES: Registry[ScriptedFactory] = Registry("scripted policy")
