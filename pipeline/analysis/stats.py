"""Paired bootstrap intervals for the difference between two methods on the same tasks."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel

RESAMPLES = 10_000
SEED = 20260101
LEVEL = 0.95


class Interval(BaseModel):
    n: int
    mean: float
    low: float
    high: float


def paired_bootstrap(differences: Sequence[float], *, resamples: int = RESAMPLES, seed: int = SEED,
                     level: float = LEVEL) -> Interval:
    """Percentile interval of the mean paired difference, resampling the pairs with replacement.

    Pairs (same task and trial, two methods) are resampled together, which keeps the per-task
    correlation between the methods; a fixed seed makes the report reproducible.
    """
    d = np.asarray(differences, dtype=float)
    if d.size == 0:
        raise ValueError("no pairs to resample")
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    chunk = max(1, 2_000_000 // d.size)  # bounded memory for large runs
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        means[start:stop] = d[rng.integers(0, d.size, size=(stop - start, d.size))].mean(axis=1)
    alpha = (1 - level) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return Interval(n=int(d.size), mean=float(d.mean()), low=float(low), high=float(high))
