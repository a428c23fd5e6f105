"""The appendix B.3 prompt templates, kept as text files next to this module.

Slots are written ``{name}`` and filled by plain replacement (not ``str.format``), because the
templates themselves contain JSON braces.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

from pydantic import BaseModel, ConfigDict

_SLOT = re.compile(r"\{([a-z_]+)\}")


@cache
def template(name: str) -> str:
    """The text of ``prompts/<name>.txt`` without its final newline."""
    return resources.files(__package__).joinpath(f"{name}.txt").read_text(encoding="utf-8").rstrip("\n")


def fill(text: str, slots: dict[str, str]) -> str:
    """Replace every ``{slot}`` of ``text`` in one pass; a slot without a value is an error.

    One pass, so text inserted into a slot (a policy, an observation) is never substituted again.
    Only ``{lowercase_name}`` counts as a slot; JSON such as ``{"content": null}`` never matches.
    """
    missing = sorted({m.group(1) for m in _SLOT.finditer(text)} - set(slots))
    if missing:
        raise KeyError(f"prompt slots without a value: {missing}")
    return _SLOT.sub(lambda m: slots[m.group(1)], text)


@cache
def _filled(text: str) -> re.Pattern[str]:
    parts = _SLOT.split(text)  # literal, slot name, literal, ...
    return re.compile("".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>.*?)" for i, p in enumerate(parts)), re.DOTALL)


def slot_spans(text: str, filled: str) -> dict[str, tuple[int, int]]:
    """Where each slot's value lies in ``filled``, which :func:`fill` made from ``text`` (the inverse
    of :func:`fill`, for analysing prompts); an error when ``filled`` is not a filling of ``text``.
    A value holding the template text that follows its slot is read as ending there."""
    match = _filled(text).fullmatch(filled)
    if match is None:
        raise ValueError("the text is not a filling of this template")
    return {name: match.span(name) for name in match.groupdict()}


def edited(text: str, *, remove: tuple[str, ...] = (), replace: tuple[tuple[str, str], ...] = ()) -> str:
    """``text`` with each part of ``remove`` cut out and each ``(old, new)`` of ``replace`` applied to
    every occurrence. A part that is not there is an error: a variant's edit of a shared template
    fails loudly when the template changes, instead of silently doing nothing."""
    for part in remove:
        if part not in text:
            raise ValueError(f"template edit: {part[:60]!r} not found")
        text = text.replace(part, "", 1)
    for old, new in replace:
        if old not in text:
            raise ValueError(f"template edit: {old[:60]!r} not found")
        text = text.replace(old, new)
    return text


def replace_between(text: str, start: str, end: str, new: str) -> str:
    """``text`` with what lies between the first ``start`` and the next ``end`` replaced by ``new``
    (both anchors kept); a missing anchor is an error, as in :func:`edited`."""
    head = text.find(start)
    tail = text.find(end, head + len(start)) if head >= 0 else -1
    if head < 0 or tail < 0:
        raise ValueError(f"template edit: {(start if head < 0 else end)[:60]!r} not found")
    return text[: head + len(start)] + new + text[tail:]


def section(text: str, heading: str) -> str:
    """The section of a rules text that starts at ``heading`` (with the blank line before it) and
    runs to the next heading of the same level or the end."""
    start = text.index("\n\n" + heading)
    level = heading.split(" ", 1)[0]
    end = text.find(f"\n\n{level} ", start + 2)
    return text[start:] if end < 0 else text[start:end]


class TaskPrompt(BaseModel):
    """What a benchmark contributes to every method's system prompt."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_policy: str
    available_tools: str
    # Which benchmark and domain the task is from, for methods with benchmark-specific parts
    # (ZipAct's world-state fields); never part of any prompt by itself.
    benchmark: str | None = None
    domain: str | None = None


def system_prompt(*, method_rules: str, output_protocol: str, task: TaskPrompt) -> str:
    """The system message shared by all methods: ReAct rules, method rules, policy, tools, protocol."""
    return fill(
        template("system"),
        {
            "react_rules": template("react_rules"),
            "method_rules": method_rules,
            "task_policy": task.task_policy,
            "available_tools": task.available_tools,
            "output_protocol": output_protocol,
        },
    )
