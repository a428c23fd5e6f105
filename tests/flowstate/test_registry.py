"""One registry type for every kind of plug-in: kinds configured in job files (a model per plug-in,
one discriminated union) and kinds that job files only name (an entry, no model)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, ValidationError

from flowstate import Registry, UnknownPluginError


class Shape(BaseModel):
    kind: str


class Square(Shape):
    kind: Literal["square"] = "square"
    side: float


def test_a_configured_kind_validates_job_entries_as_the_union_of_its_models() -> None:
    shapes: Registry[Callable[[Shape], float]] = Registry("shape", "kind")
    shapes.register("square", lambda s: s.side ** 2 if isinstance(s, Square) else 0.0, Square)

    class Job(BaseModel):
        shapes: list[Annotated[Shape, shapes.union()]]

    [square] = Job.model_validate({"shapes": [{"kind": "square", "side": 3}]}).shapes
    assert isinstance(square, Square) and shapes.get("square")(square) == 9.0
    with pytest.raises(ValidationError, match="does not match any of the expected tags: 'square'"):
        Job.model_validate({"shapes": [{"kind": "circle"}]})


def test_a_kind_job_files_only_name_registers_entries_without_a_model() -> None:
    policies: Registry[Callable[[str], str]] = Registry("scripted policy")
    policies.register("echo", lambda text: text)
    policies.register("shout", str.upper)
    assert policies.names() == ["echo", "shout"] and policies.get("shout")("hi") == "HI"
    assert policies.models() == {} and policies.version == 2
    with pytest.raises(UnknownPluginError, match=r"no scripted policy 'whisper' is registered \(known: echo, shout\)"):
        policies.get("whisper")


def test_a_model_goes_exactly_with_a_discriminator() -> None:
    with pytest.raises(TypeError, match="not configured in job files: register 'square' without a model"):
        Registry("scripted policy").register("square", object(), Square)
    with pytest.raises(TypeError, match=r"shape 'square' needs the pydantic model that configures it \(kind: Literal"):
        Registry("shape", "kind").register("square", object())
    with pytest.raises(TypeError, match="its registry has no union"):
        Registry("scripted policy").union()

