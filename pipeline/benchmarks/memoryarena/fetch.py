"""`flowstate data fetch memoryarena`: the four task files from the Hugging Face dataset at the pinned
revision, checked against the SHA-256 values third parties record (SOURCE.md).

Those values could not be checked here (Hugging Face is out of reach), so a mismatch is reported
plainly and the file refused, unless ``--accept-new-checksums``: then the file is kept and its
SHA-256 recorded in ``memoryarena/accepted_checksums.json``, so a later fetch accepts exactly it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from pipeline.benchmarks.memoryarena.data import (
    ACCEPTED_CHECKSUMS,
    CONFIGS,
    HF_DATASET,
    HF_REVISION,
    HF_SHA256,
    SUBDIR,
    MemoryArenaDataError,
)
from pipeline.core.atomic import write_bytes_atomic, write_json_atomic
from pipeline.core.data import download, sha256_file

DEFAULT_BASE_URL = f"https://huggingface.co/datasets/{HF_DATASET}/resolve/{HF_REVISION}"


class FetchReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    root: Path
    downloaded: list[str] = []
    already_present: list[str] = []
    # config -> (pinned SHA-256, accepted SHA-256)
    accepted: dict[str, tuple[str, str]] = {}
    accepted_file: Path | None = None


def expected_checksums(root: Path) -> dict[str, str]:
    """The pinned values, with those a user accepted instead."""
    accepted = root / ACCEPTED_CHECKSUMS
    recorded = json.loads(accepted.read_text()) if accepted.is_file() else {}
    return {**HF_SHA256, **recorded}


def fetch_memoryarena(data_dir: str | os.PathLike[str], *, base_url: str = DEFAULT_BASE_URL,
                      accept_new_checksums: bool = False, timeout: float = 60.0) -> FetchReport:
    root = Path(data_dir).expanduser().resolve() / SUBDIR
    report = FetchReport(root=root)
    expected = expected_checksums(root)
    accepted: dict[str, str] = {}
    for config in CONFIGS:
        target = root / config / "data.jsonl"
        if target.is_file() and sha256_file(target) == expected[config]:
            report.already_present.append(config)
            continue
        data = download(f"{base_url.rstrip('/')}/{config}/data.jsonl", timeout, MemoryArenaDataError)
        actual = hashlib.sha256(data).hexdigest()
        if actual != expected[config]:
            if not accept_new_checksums:
                raise MemoryArenaDataError(
                    f"{config}/data.jsonl from {base_url} has SHA-256 {actual}, but the pinned value is "
                    f"{expected[config]}. The pinned values come from third parties and could not be checked "
                    "against the dataset itself: the file may be a newer revision, or not the dataset. Nothing "
                    "was written. Run again with --accept-new-checksums to keep it and record its checksum.")
            accepted[config] = actual
            report.accepted[config] = (expected[config], actual)
        write_bytes_atomic(target, data, fsync=True)
        report.downloaded.append(config)
    if accepted:
        record = root / ACCEPTED_CHECKSUMS
        previous = json.loads(record.read_text()) if record.is_file() else {}
        write_json_atomic(record, {**previous, **accepted})
        report.accepted_file = record
    return report
