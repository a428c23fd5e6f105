"""The tables analysis reads (every table a sweep writes), and the empty files that carry their schemas."""

from __future__ import annotations

import hashlib
import tempfile
from functools import cache
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.atomic import write_atomic
from pipeline.store.schema import SCHEMAS

ANALYSIS_SCHEMAS: dict[str, pa.Schema] = SCHEMAS
ANALYSIS_TABLES: tuple[str, ...] = tuple(ANALYSIS_SCHEMAS)


@cache
def anchor_file(table: str) -> Path:
    """An empty Parquet file with the table's current schema.

    Read first by every view, so that each column exists (NULL) in runs written before it was added
    and a table without any file yet still has its columns.
    """
    schema = ANALYSIS_SCHEMAS[table]
    digest = hashlib.sha256(schema.serialize().to_pybytes()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / "flowstate-schemas" / f"{table}-{digest}.parquet"
    if not path.exists():
        write_atomic(path, lambda tmp: pq.write_table(schema.empty_table(), tmp))
    return path
