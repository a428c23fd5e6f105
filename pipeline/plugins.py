"""Finding plug-ins: the built-in ones, installed packages' entry points, and a job's own modules.

A plug-in is a module that registers benchmarks (:func:`pipeline.benchmarks.plugin.register_benchmark`),
methods (:func:`flowstate.register_method`) or deployment kinds
(:func:`pipeline.llm.deployments.register_deployment_kind`) when imported. The built-in benchmarks
are the packages under ``pipeline/benchmarks/``; an installed package adds its own under the entry
point group ``flowstate.plugins``; a job file may name modules under ``plugins:`` (imported in the
driver and in every episode actor before anything else).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from importlib import metadata

ENTRY_POINT_GROUP = "flowstate.plugins"
_loaded: set[str] = set()
_builtin_loaded = False


class PluginError(ValueError):
    """A plug-in module that cannot be imported (the message names it and the cause)."""


def _import(name: str, where: str) -> None:
    if name in _loaded:
        return
    try:
        importlib.import_module(name)
    except ImportError as exc:
        raise PluginError(f"plug-in module {name!r} ({where}) could not be imported: {exc}") from None
    _loaded.add(name)


def load_builtin_plugins() -> None:
    """The methods, deployment kinds and benchmark packages this project ships, and installed
    plug-ins: once per process (listing the installed packages' entry points costs about 50 ms)."""
    global _builtin_loaded
    if _builtin_loaded:
        return
    import flowstate.methods  # noqa: F401 - registers the built-in methods
    import pipeline.benchmarks
    import pipeline.llm.deployments  # noqa: F401 - registers the built-in deployment kinds

    for module in pkgutil.iter_modules(pipeline.benchmarks.__path__):
        if module.ispkg:
            _import(f"pipeline.benchmarks.{module.name}", "built in")
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        _import(entry.value.split(":")[0], f"entry point {entry.name!r}")
    _builtin_loaded = True


def load_plugins(modules: Iterable[str] = ()) -> None:
    """The built-in plug-ins, then ``modules`` (a job's ``plugins:``), each imported once per process."""
    load_builtin_plugins()
    for name in modules:
        _import(name, "named by the job")
