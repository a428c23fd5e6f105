"""tools.json derived from tool sources by parsing them.

Oracles: the pinned SHA-256 of SOURCE.md (for sources equivalent to upstream's), the installed
pydantic's own ``model_json_schema`` (for the parameter schema rules) and docstring_parser's
documented splitting behaviour written out as literal expectations.
"""

from __future__ import annotations

import hashlib
import json
import textwrap
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field, create_model

from pipeline.benchmarks.taubench.data import DOMAINS, SHA256
from pipeline.benchmarks.taubench.schema_derivation import ToolSourceError, derive_tools_json, parse_docstring

from .conftest import data_dir
from .synthetic_tools import write_sources

TOOLKIT_IMPORTS = """\
from typing import List, Literal, Optional, Union

from tau2.environment.toolkit import ToolKitBase, ToolType, is_tool
"""


def derive(files: dict[str, str], reads: list[str] | None = None) -> dict[str, Any]:
    """tools.json of an in-memory ``demo`` domain package; ``reads`` records the files asked for."""
    def read(file: str) -> str:
        if reads is not None:
            reads.append(file)
        return textwrap.dedent(files[file])

    return json.loads(derive_tools_json("demo", read))


@pytest.mark.parametrize("domain", DOMAINS)
def test_sources_equivalent_to_upstream_rebuild_the_pinned_bytes(domain: str, tmp_path: Path) -> None:
    folder = tmp_path / domain
    write_sources(data_dir() / "taubench" / domain / "tools.json", folder)
    reads: list[str] = []

    def read(file: str) -> str:
        reads.append(file)
        return (folder / file).read_text()

    assert hashlib.sha256(derive_tools_json(domain, read)).hexdigest() == SHA256[f"{domain}/tools.json"]
    # Argument models are looked up only when a signature needs one (retail's use none).
    assert reads == (["tools.py", "data_model.py"] if domain == "airline" else ["tools.py"])


@pytest.mark.parametrize("domain", DOMAINS)
def test_upstream_sources_fetched_into_the_data_directory_rebuild_the_pinned_bytes(domain: str) -> None:
    folder = data_dir() / "taubench" / "upstream_src" / domain
    if not (folder / "tools.py").is_file():
        pytest.skip(f"no upstream sources in {folder} (`flowstate data fetch taubench` puts them there)")
    derived = derive_tools_json(domain, lambda file: (folder / file).read_text())
    assert hashlib.sha256(derived).hexdigest() == SHA256[f"{domain}/tools.json"]


@pytest.mark.parametrize(("docstring", "description", "arguments"), [
    pytest.param("Cancel a pending order. If it is\n    already shipped, it cannot be.\n\n"
                 "    Args:\n        order_id: The id.\n",
                 "Cancel a pending order. If it is\n\nalready shipped, it cannot be.", {"order_id": "The id."},
                 id="wrapped-first-line-gets-a-blank-line"),
    pytest.param("\n    Book a reservation.\n\n\n    Args:\n        user_id: The user.\n\n"
                 "    Returns:\n        Nothing.\n",
                 "Book a reservation.", {"user_id": "The user."}, id="leading-newline-and-sections"),
    pytest.param("Exchange items.\n\n    Args:\n        ids: first\n"
                 "             second\n               third\n             fourth\n",
                 "Exchange items.", {"ids": "first\nsecond\n  third\nfourth"}, id="continuation-lines-cleandoc"),
    pytest.param("Do it.\n\n    Args:\n        amount (int): How much.\n", "Do it.", {"amount": "How much."},
                 id="typed-argument-name"),
    pytest.param("Just text.\n    More text.", "Just text.\n\nMore text.", {}, id="no-sections"),
    pytest.param("Do it.\n\n    Args:\n        x: The x.\n\n    Raises:\n        ValueError if bad\n",
                 "Do it.\n\nArgs:\n    x: The x.\n\nRaises:\n    ValueError if bad", {},
                 id="entry-without-colon-falls-back-to-rest-style"),
    pytest.param("Do it.\n\nArgs:\n    x: The x.\nStray: text\n", "Do it.", {"x": "The x."},
                 id="unindented-line-ends-a-section"),
    pytest.param("", "the_tool", {}, id="no-docstring-uses-the-name"),
])
def test_docstrings_split_like_upstream(docstring: str, description: str, arguments: dict[str, str]) -> None:
    assert parse_docstring("the_tool", docstring) == (description, arguments)


DATA_MODEL = '''\
from typing import Literal, Optional

from pydantic import BaseModel, Field

Tag = Literal["red", "green"]


class Item(BaseModel):
    """An item.

        Indented detail.
    """

    code: str = Field(description="The code.")
    count: int = Field(3, description="How many.")
    note: Optional[str] = Field(description="A note.", default=None)
    weight: float = 1.5
    tag: Tag


class Box(BaseModel):
    items: list[Item]
    label: str
'''
# name, annotation, default (None: required), docstring description (None: undocumented)
PARAMETERS = [
    ("text", "str", None, "Some text."),
    ("number", "int", None, "A number.\nSecond line."),
    ("flag", "bool", None, None),
    ("mapping", "dict", None, "Free-form."),
    ("numbers", "list[int]", None, "Numbers."),
    ("either", "Union[int, None, str]", None, "Int or text."),
    ("items", "List[Item | dict]", None, "Items or dicts."),
    ("item", "Item", None, "One item."),
    ("box", "Box", None, "A box."),
    ("tag", "Tag", None, "A tag."),
    ("only", 'Literal["only"]', None, "Constant."),
    ("mixed", 'Literal["a", 1]', None, "Mixed literal."),
    ("ratio", "float", "0.5", "A ratio."),
    ("maybe", "Optional[str]", "None", "Maybe text."),
    ("maybe_item", "Optional[Item]", "None", "An item or nothing."),
]


def test_parameter_schemas_match_pydantic() -> None:
    signature = ", ".join(f"{name}: {annotation}" + (f" = {default}" if default else "")
                          for name, annotation, default, _ in PARAMETERS)
    documented = "\n".join(f"{' ' * 16}{name}: " + text.replace("\n", "\n" + " " * 20)
                           for name, _, _, text in PARAMETERS if text)
    tools = TOOLKIT_IMPORTS + f'''
from .data_model import Box, Item, Tag


class DemoTools(ToolKitBase):
    @is_tool(ToolType.READ)
    def everything(self, {signature}) -> str:
        """Every annotation.

        Args:
{documented}
        """
'''
    derived = derive({"tools.py": tools, "data_model.py": DATA_MODEL})["tools"][0]["function"]["parameters"]

    namespace: dict[str, Any] = vars(typing).copy()
    exec(compile(DATA_MODEL, "data_model.py", "exec", dont_inherit=True), namespace)  # noqa: S102 - own source
    fields: dict[str, Any] = {}
    for name, annotation, default, text in PARAMETERS:
        value = eval(default, namespace) if default else ...  # noqa: S307 - the test's own literals
        fields[name] = (eval(annotation, namespace), Field(value, description=text))  # noqa: S307
    expected = create_model("parameters", **fields).model_json_schema()
    assert json.dumps(derived) == json.dumps(expected)  # same keys, values and key order


def test_tools_are_the_decorated_methods_in_definition_order_with_their_kinds() -> None:
    tools = TOOLKIT_IMPORTS + '''
from tau2.domains.demo.data_model import Item


class DemoTools(ToolKitBase):
    """Tools."""

    def helper(self, x: str) -> str:
        """Undecorated: not a tool."""

    @is_tool(ToolType.WRITE)
    def zeta(self, item: Item) -> str:
        """Write."""

    @is_tool()
    def alpha(self) -> str:
        """Read by default."""

    @is_tool(tool_type=ToolType.THINK)
    def mid(self, *, note: str = "x") -> str:
        """Think."""
'''
    derived = derive({"tools.py": tools, "data_model.py": DATA_MODEL})
    assert list(derived) == ["tools", "kinds"]
    assert derived["kinds"] == {"zeta": "write", "alpha": "read", "mid": "think"}
    assert [tool["function"]["name"] for tool in derived["tools"]] == ["zeta", "alpha", "mid"]
    zeta, alpha, mid = (tool["function"]["parameters"] for tool in derived["tools"])
    assert list(zeta["$defs"]) == ["Item"] and "$defs" not in alpha and "$defs" not in mid  # per tool
    assert alpha == {"properties": {}, "title": "parameters", "type": "object"}
    assert mid["properties"]["note"] == {"default": "x", "title": "Note", "type": "string"} and "required" not in mid


def test_output_is_two_space_json_with_a_final_newline() -> None:
    tools = TOOLKIT_IMPORTS + '''
class DemoTools(ToolKitBase):
    @is_tool(ToolType.GENERIC)
    def calculate(self, expression: str) -> str:
        """Calculate."""
'''
    raw = derive_tools_json("demo", lambda file: tools)
    assert raw == (json.dumps(json.loads(raw), indent=2) + "\n").encode()
    assert raw.startswith(b'{\n  "tools": [\n    {\n      "type": "function",\n      "function": {\n        "name"')


@pytest.mark.parametrize(("body", "message"), [
    pytest.param("def t(self, x: typing.Dict[str, int]) -> str:", r"tools\.py:\d+: no JSON schema rule for .*Dict",
                 id="unsupported-annotation"),
    pytest.param("def t(self, x) -> str:", r"t\(x\) has no annotation", id="missing-annotation"),
    pytest.param("def t(self, x: int = WHATEVER) -> str:", "WHATEVER is not a literal", id="non-literal-default"),
    pytest.param("def t(self, x: Weird) -> str:", r"data_model\.py:\d+: argument model Weird must derive",
                 id="model-with-other-base"),
    pytest.param("def t(self, x: Aliased) -> str:", r"no JSON schema rule for Field\(alias=", id="field-option"),
])
def test_unsupported_constructs_fail_naming_file_and_line(body: str, message: str) -> None:
    data_model = '''
from pydantic import BaseModel, Field

class Base(BaseModel):
    x: int

class Weird(Base):
    y: int

class Aliased(BaseModel):
    y: int = Field(alias="why")
'''
    tools = TOOLKIT_IMPORTS + f'''
import typing
from .data_model import Aliased, Weird


class DemoTools(ToolKitBase):
    @is_tool()
    {body}
        """Tool."""
'''
    with pytest.raises(ToolSourceError, match=message):
        derive({"tools.py": tools, "data_model.py": data_model})


def test_exactly_one_toolkit_class_is_required() -> None:
    toolkit = '''
class {name}(ToolKitBase):
    @is_tool()
    def t(self) -> str:
        """Tool."""
'''
    with pytest.raises(ToolSourceError, match="expected one toolkit class .* found 2"):
        derive({"tools.py": TOOLKIT_IMPORTS + toolkit.format(name="A") + toolkit.format(name="B")})
