"""The machine line every benchmark prints first (figures mean little without it)."""

from __future__ import annotations

import os
import sys


def machine() -> str:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"machine: {os.cpu_count()} cores, {memory:.1f} GiB RAM, Python {sys.version.split()[0]}"
