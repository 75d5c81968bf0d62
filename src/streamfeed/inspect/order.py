"""Is the data sorted? Spearman's rho of each column against the row number, on a thinned sample.

A file sorted by label or time trains badly unless it is shuffled; a
column whose ranks follow the row order says so. The rows kept for the
test are every ``stride``-th row by global row number, the stride doubling
whenever more than ``capacity`` rows are kept, so memory stays bounded
and the sample stays evenly spread over the whole file.
"""

from __future__ import annotations

import collections

import numpy as np

from ..core import Chunk, chunk_len


def average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 0..n-1 with ties given their average rank (as Spearman's rho needs)."""
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return (starts + (counts - 1) / 2.0)[inverse.ravel()]


def spearman_with_order(values: np.ndarray) -> float:
    """Spearman's rho of ``values`` (in row order) against the row number."""
    finite = np.isfinite(values) if values.dtype.kind == "f" else np.ones(len(values), dtype=bool)
    values = values[finite]
    if len(values) < 3:
        return 0.0
    ranks = average_ranks(values)
    order = np.flatnonzero(finite).astype(np.float64)
    if ranks.std() == 0:
        return 0.0
    return float(np.corrcoef(ranks, order)[0, 1])


class ThinnedSample:
    """Every ``stride``-th row (by global row number), the stride doubling to stay within ``capacity``."""

    def __init__(self, capacity: int) -> None:
        self.capacity, self.stride, self.kept = capacity, 1, 0
        self.parts: dict[str, list[np.ndarray]] = collections.defaultdict(list)

    def add(self, start: int, chunk: Chunk) -> None:
        """Adds the rows of ``chunk``, whose first row is row ``start`` of the data."""
        rows = np.arange(start, start + chunk_len(chunk))
        take = rows % self.stride == 0
        for name, column in chunk.items():
            self.parts[name].append(column[take])
        self.parts["__row__"].append(rows[take])
        self.kept += int(take.sum())
        if self.kept > self.capacity:
            self.stride *= 2
            merged = {name: np.concatenate(parts) for name, parts in self.parts.items()}
            keep = merged["__row__"] % self.stride == 0
            self.parts = collections.defaultdict(list, {name: [column[keep]] for name, column in merged.items()})
            self.kept = int(keep.sum())

    def columns(self) -> Chunk:
        """The kept rows of every column, in row order."""
        return {name: np.concatenate(parts) for name, parts in self.parts.items() if name != "__row__"}
