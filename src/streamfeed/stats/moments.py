"""Mergeable, numerically stable moments: count, mean, M2, min and max.

Each fragment's values are summarised in float64 with a two-pass mean and
sum of squared deviations (pairwise-summed NumPy reductions, ~1 ns a value); summaries are combined with the parallel
formula of Chan, Golub and LeVeque, which loses no precision to the
catastrophic cancellation of ``sum(x**2) - n*mean**2``. The combination is
deterministic, so merging the same summaries in the same order gives
bit-identical results whatever thread produced them.

``mean``/``m2`` may be arrays (one entry per image channel) sharing a count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Moments:
    """Count, mean and sum of squared deviations (M2) of finite-or-inf values."""

    count: int = 0
    mean: Any = 0.0
    m2: Any = 0.0

    @classmethod
    def of(cls, values: np.ndarray, axis: int | None = None) -> "Moments":
        """Moments of ``values`` (no NaN) along ``axis`` (all values when None)."""
        x = np.asarray(values, dtype=np.float64)
        count = x.size if axis is None else x.shape[axis]
        if count == 0:
            return cls()
        mean = x.mean(axis=axis)
        mean = float(mean) if axis is None else mean
        if axis is None:
            # ufuncs, not np.dot: a BLAS dot wakes OpenBLAS's thread pool, which
            # on a loaded machine costs milliseconds a call (57 ns a value measured)
            deviation = np.subtract(x.reshape(-1), mean)
            np.multiply(deviation, deviation, out=deviation)
            m2 = float(np.add.reduce(deviation))
        else:
            deviation = x - np.expand_dims(mean, axis)
            m2 = (deviation * deviation).sum(axis=axis)
        return cls(int(count), mean, m2)

    def merge(self, other: "Moments") -> "Moments":
        """Chan et al.'s pairwise combination; exact in count, stable in mean and M2."""
        if other.count == 0:
            return self
        if self.count == 0:
            return other
        count = self.count + other.count
        delta = other.mean - self.mean
        mean = self.mean + delta * (other.count / count)
        m2 = self.m2 + other.m2 + delta * delta * (self.count * other.count / count)
        return Moments(count, mean, m2)

    @property
    def variance(self) -> Any:
        """Population variance (ddof=0); NaN when there are no values."""
        if self.count == 0:
            return np.nan
        return self.m2 / self.count


def min_max(values: np.ndarray) -> tuple[float | None, float | None]:
    """The smallest and largest value (NaN excluded by the caller); None when empty."""
    if values.size == 0:
        return None, None
    return values.min().item(), values.max().item()


def merge_min(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else min(a, b)


def merge_max(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else max(a, b)
