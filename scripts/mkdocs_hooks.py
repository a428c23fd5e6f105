"""mkdocs hooks (mkdocs.yml): the reference pages' generated parts, made from the code at each build.

A page holds a marker where its generated part goes: ``<!-- generated: job reference -->`` (every key
of a job file, from the pydantic models and the registries) or ``<!-- generated: sql reference -->``
(every table, column and shipped query).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's code, whatever is installed

from pipeline.analysis.reference import sql_reference  # noqa: E402
from pipeline.config.reference import job_reference  # noqa: E402

GENERATED: dict[str, Callable[[], str]] = {
    "<!-- generated: job reference -->": job_reference,
    "<!-- generated: sql reference -->": sql_reference,
}


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    for marker, make in GENERATED.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
