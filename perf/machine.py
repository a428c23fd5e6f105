"""The machine line every benchmark prints first (figures mean little without it), and its memory gauge."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def machine() -> str:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"machine: {os.cpu_count()} cores, {memory:.1f} GiB RAM, Python {sys.version.split()[0]}"


def rss_mib(field: str = "VmRSS", pid: int | str = "self") -> float:
    """A process's resident memory now, or its peak with ``VmHWM`` (Linux; the peak of this process
    image, unlike ``ru_maxrss``, which Linux carries across exec from the parent); NaN once it is gone."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return float("nan")
    for line in lines:
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")
