"""Content hashes: every id (sweep, cell, episode) is the hash of a canonical JSON text."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(data: Any) -> str:
    """Sorted keys, no whitespace, ASCII: the text every content hash is taken of."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)


def content_hash(data: Any, length: int = 16) -> str:
    """sha256 of canonical JSON (sorted keys, no whitespace): stable across runs and machines."""
    return hashlib.sha256(canonical_json(data).encode()).hexdigest()[:length]


