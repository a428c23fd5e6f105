"""Name -> plug-in registries: one type for every kind of plug-in.

A kind configured in job files has a discriminator key and a pydantic model per plug-in, and the
models form one discriminated union: a job file says ``{name: bm25, top_k: 3}`` or ``{benchmark:
taubench, domain: airline}``, the key picks a registered model, which then validates the rest
strictly. Registering a new plug-in widens the union; :attr:`Registry.version` tells models that
embed the union when to rebuild their schema. A kind that job files only name (a scripted policy, a
data fetcher) has no discriminator, and its plug-ins no model.

Plug-ins are found one way, built-in or not: a package declares its plug-in modules under the entry
point group ``flowstate.plugins``, and the first look into any registry imports them all (each
registers itself when imported). A job may name more modules (its ``plugins:``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib import metadata
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, GetCoreSchemaHandler
from pydantic_core import core_schema

from flowstate.errors import FlowStateError

T = TypeVar("T")

ENTRY_POINT_GROUP = "flowstate.plugins"
_imported: set[str] = set()
_discovered = False


class PluginError(FlowStateError, ValueError):
    """A plug-in module that cannot be imported (the message names it and the cause)."""


def import_plugin(name: str, where: str) -> None:
    """Import a plug-in module once per process; its import registers what it provides."""
    if name in _imported:
        return
    _imported.add(name)
    try:
        importlib.import_module(name)
    except ImportError as exc:
        _imported.discard(name)
        raise PluginError(f"plug-in module {name!r} ({where}) could not be imported: {exc}") from None


def discover_plugins() -> None:
    """Import every installed package's plug-in modules (this project's own included), once per
    process: listing the entry points costs about 50 ms."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        import_plugin(entry.value.split(":")[0], f"entry point {entry.name!r}")


class UnknownPluginError(FlowStateError, KeyError):
    """A name that no plug-in registered (the message lists the known ones)."""

    def __str__(self) -> str:  # KeyError would print the message quoted
        return str(self.args[0])


class Registry(Generic[T]):
    """Plug-ins of one kind by name; with a ``discriminator``, each with the pydantic model that
    configures it."""

    def __init__(self, what: str, discriminator: str | None = None) -> None:
        self.what = what
        self.discriminator = discriminator
        self._entries: dict[str, T] = {}
        self._models: dict[str, type[BaseModel]] = {}
        self.version = 0

    def register(self, name: str, entry: T, model: type[BaseModel] | None = None) -> None:
        """Add (or replace) the plug-in ``name``; ``model``, given exactly when the registry has a
        discriminator, must declare it as ``Literal[name]``."""
        if model is not None:
            self._check_model(name, model)
            self._models[name] = model
        elif self.discriminator is not None:
            raise TypeError(f"{self.what} {name!r} needs the pydantic model that configures it "
                            f"({self.discriminator}: Literal[{name!r}])")
        self._entries[name] = entry
        self.version += 1

    def _check_model(self, name: str, model: type[BaseModel]) -> None:
        if self.discriminator is None:
            raise TypeError(f"a {self.what} is not configured in job files: register {name!r} without a model")
        field = model.model_fields.get(self.discriminator)
        if field is None or getattr(field.annotation, "__args__", None) != (name,):
            raise TypeError(f"{model.__name__} must declare {self.discriminator}: Literal[{name!r}]")

    def get(self, name: str) -> T:
        if name not in self._entries:
            discover_plugins()
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownPluginError(f"no {self.what} {name!r} is registered (known: {', '.join(self.names()) or 'none'})"
                                     ) from None

    def names(self) -> list[str]:
        discover_plugins()
        return sorted(self._entries)

    def models(self) -> dict[str, type[BaseModel]]:
        discover_plugins()
        return dict(self._models)

    def union(self) -> RegisteredUnion:
        """An annotation marker: ``Annotated[Base, registry.union()]`` validates as the tagged union."""
        if self.discriminator is None:
            raise TypeError(f"a {self.what} is not configured in job files: its registry has no union")
        return RegisteredUnion(self, self.discriminator)


class RegisteredUnion:
    """Pydantic schema hook: the union of a registry's models, discriminated on its key, built
    whenever the enclosing model's schema is (re)built."""

    def __init__(self, registry: Registry[Any], discriminator: str) -> None:
        self.registry = registry
        self.discriminator = discriminator

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        models = self.registry.models()
        if not models:
            raise TypeError(f"no {self.registry.what} is registered yet")
        choices: dict[Any, core_schema.CoreSchema] = {name: handler.generate_schema(m) for name, m in models.items()}
        return core_schema.tagged_union_schema(choices, discriminator=self.discriminator)


def rebuild_when_changed(model: type[BaseModel], *registries: Registry[Any]) -> Callable[[], None]:
    """A function that rebuilds ``model``'s schema once any of ``registries`` has changed since."""
    seen = [tuple(r.version for r in registries)]

    def rebuild() -> None:
        now = tuple(r.version for r in registries)
        if now != seen[0]:
            model.model_rebuild(force=True)
            seen[0] = now

    return rebuild
