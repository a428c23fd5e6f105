"""A job's own plug-in modules (its ``plugins:``), imported after the installed ones.

A plug-in is a module that registers benchmarks (:func:`pipeline.benchmarks.base.register_benchmark`),
methods (:func:`flowstate.register_method`), deployment kinds
(:func:`pipeline.llm.deployments.register_deployment_kind`) or scripted policies when imported.
Installed packages declare theirs under the entry point group ``flowstate.plugins`` (this project's
built-ins are declared the same way, in ``pyproject.toml``), found on the first look into a registry
(:func:`flowstate.registry.discover_plugins`); the modules a job names are imported in the driver and
in every episode actor before anything else.
"""

from __future__ import annotations

from collections.abc import Iterable

from flowstate.registry import discover_plugins, import_plugin


def load_plugins(modules: Iterable[str] = ()) -> None:
    """The installed plug-ins, then ``modules`` (a job's ``plugins:``), each imported once per process."""
    discover_plugins()
    for name in modules:
        import_plugin(name, "named by the job")
