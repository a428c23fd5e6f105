"""MemoryArena (revision 6cd9de1): formal reasoning (math, physics), group travel planning and bundled
shopping's grader, as CONTRACT.md next to the data (``$FLOWSTATE_DATA/memoryarena``) states them.
Importing this package registers the benchmark (:mod:`pipeline.benchmarks.memoryarena.benchmark`)."""

from pipeline.benchmarks.memoryarena.benchmark import MEMORYARENA, MemoryArena, MemoryArenaCell

__all__ = ["MEMORYARENA", "MemoryArena", "MemoryArenaCell"]
