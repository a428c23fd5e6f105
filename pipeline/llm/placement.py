"""Where the sweep's own actors run: on the driver's node."""

from __future__ import annotations

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy


def on_this_node() -> NodeAffinitySchedulingStrategy:
    """Affinity to this process's node. The driver's episode actors and a deployment's router run
    there: results land where the driver (and its output directory) is, and the loss of any other
    node takes only what that node hosts (a replica), not episodes or the routing of every
    conversation. Hard, not soft: these actors ask for no resources, and Ray places such an actor
    on a random node whatever a soft affinity says; a driver's node can always host them, and is
    alive as long as the driver is."""
    return NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)
