"""Base for the database record models of both domains.

Upstream validates its databases and every record a tool builds with pydantic models in their
default (lax) mode, and tools build records from raw LLM arguments. Reproducing that coercion
(integral floats and numeric strings into ints, numbers into floats, strict strings, exact
literals, unknown keys dropped) is what keeps hashes equal, so these models deliberately keep
pydantic's defaults instead of the project's ``extra="forbid"`` boundary rule.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class UpstreamRecord(BaseModel):
    model_config = ConfigDict(extra="ignore")

    @classmethod
    def build(cls, **fields: Any) -> dict[str, Any]:
        """Validate a record the way upstream constructs it and return its canonical dict."""
        return cls.model_validate(fields).model_dump()


class Name(UpstreamRecord):
    first_name: str
    last_name: str


class CreditCard(UpstreamRecord):
    source: Literal["credit_card"]
    id: str
    brand: str
    last_four: str
