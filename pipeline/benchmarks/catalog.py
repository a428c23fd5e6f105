"""What a benchmark cell contains: its task ids and the checksums of the data it reads."""

from __future__ import annotations

from pipeline.benchmarks import taubench
from pipeline.benchmarks.taubench.data import SHA256, verified_path
from pipeline.config import BenchmarkCell


def task_ids(cell: BenchmarkCell) -> list[str]:
    """Explicit ids (checked to exist), else the split's ids; then the limit."""
    known = [t.id for t in taubench.load_tasks(cell.domain)]
    if cell.tasks is not None:
        missing = [t for t in cell.tasks if t not in set(known)]
        if missing:
            raise ValueError(f"taubench {cell.domain} has no tasks {missing} (ids run {known[0]}..{known[-1]})")
        ids = list(cell.tasks)
    else:
        ids = taubench.task_split(cell.domain, cell.split)
    return ids[: cell.limit] if cell.limit else ids


def data_files(cell: BenchmarkCell) -> list[str]:
    """Data files an episode of this cell reads (relative to the benchmark's data folder)."""
    return sorted(f for f in SHA256 if f.startswith(f"{cell.domain}/")) + ["user_simulator/simulation_guidelines.md"]


def data_checksums(cell: BenchmarkCell) -> dict[str, str]:
    """``taubench/<file> -> sha256`` after verifying each file on disk (a missing file is an error here)."""
    checksums = {}
    for relative in data_files(cell):
        verified_path(relative)
        checksums[f"{cell.benchmark}/{relative}"] = SHA256[relative]
    return checksums
