"""Methods by name: each registers its options model and its session class.

``methods:`` in a job file is the union of the registered options models, discriminated on
``name``, so ``{name: flowstate, protocol: json}`` is validated by FlowState's own model and an
unknown key is an error naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic

from flowstate.data import PromptRelease
from flowstate.methods.base import (
    Capability,
    EpisodeShape,
    MethodCallers,
    MethodOptions,
    MethodSession,
    OptionsT,
    OwnCalls,
)
from flowstate.prompts import TaskPrompt
from flowstate.registry import Registry


@dataclass(frozen=True)
class MethodPlugin(Generic[OptionsT]):
    """A method: its options model, the session class that reads options of that model, and the
    released prompts it reads at run time, if any (fetched by ``flowstate data fetch methods``)."""

    name: str
    options: type[OptionsT]
    session: type[MethodSession[OptionsT]]
    release: PromptRelease | None = None

    def uses(self, options: OptionsT) -> frozenset[Capability]:
        """What the method uses with these options (a method's capabilities may follow its options)."""
        return self.session.capabilities(options)

    def own_calls(self, options: OptionsT, task: TaskPrompt, shape: EpisodeShape) -> OwnCalls:
        """The calls of the method's own models in an episode of ``shape`` (its declaration)."""
        return self.session.own_calls(options, task, shape)


# Each plug-in's options type is its own (register_method checks that its session reads that type):
# looked up by name, it is known only at run time, hence Any.
METHODS: Registry[MethodPlugin[Any]] = Registry("method", "name")


def register_method(options: type[OptionsT], session: type[MethodSession[OptionsT]], *,
                    release: PromptRelease | None = None) -> MethodPlugin[OptionsT]:
    """Register a method under the ``name`` its options model declares (``Literal["..."]``)."""
    name = options.model_fields["name"].default
    plugin = MethodPlugin(name=name, options=options, session=session, release=release)
    METHODS.register(name, plugin, options)
    return plugin


def method_plugin(name: str) -> MethodPlugin[Any]:
    return METHODS.get(name)


def method_options(name_or_options: str | MethodOptions | dict[str, Any]) -> MethodOptions:
    """Options from a name (all defaults), a dict (validated by the method's model), or as given."""
    if isinstance(name_or_options, MethodOptions):
        return name_or_options
    data = {"name": name_or_options} if isinstance(name_or_options, str) else dict(name_or_options)
    options: MethodOptions = method_plugin(data["name"]).options.model_validate(data)
    return options


def new_session(method: str | MethodOptions | dict[str, Any], task: TaskPrompt, tool_names: list[str] | None = None,
                callers: MethodCallers = MethodCallers()) -> MethodSession[Any]:
    """A fresh episode of a method for a task (policy + tool list), given the callers it declared."""
    options = method_options(method)
    plugin = method_plugin(options.name)
    missing = [c.value for c, have in ((Capability.MEMORY_MODEL, callers.memory), (Capability.EMBEDDINGS, callers.embeddings))
               if c in plugin.uses(options) and have is None]
    if missing:
        raise ValueError(f"method {options.name!r} needs callers it was not given: {', '.join(missing)}")
    return plugin.session(task, options, tool_names, callers)
