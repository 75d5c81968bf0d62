"""Statistics for the tests of what is built from them (layers, transforms, sampling).

``stats_of(dataset, ...)`` is ``streamfeed.stats.compute_stats`` with the
tests' calling convention. :class:`ExactStats` gives the same read-only API
(``stats[col].mean``, ``.std``, ``.quantile(q)``...) computed exactly with
NumPy from in-memory numeric columns, for tests that need stats without a
dataset; the tests' expected values are always recomputed from the raw data.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from streamfeed.stats import compute_stats


class ExactColumn:
    """Exact statistics of one numeric column (NaN excluded)."""

    def __init__(self, name: str, values: np.ndarray) -> None:
        self.name, self.kind, self.dtype = name, "numeric", str(values.dtype)
        self.count = len(values)
        data = values.astype("float64")
        finite = data[~np.isnan(data)]
        self.nans = int(np.isnan(data).sum())
        self.nulls = 0
        self._sorted = np.sort(finite)
        self.min, self.max = float(finite.min()), float(finite.max())
        self.mean, self.variance = float(finite.mean()), float(finite.var())
        self.std = float(np.sqrt(self.variance))
        self.quantile_rank_error = 0.0
        self.distinct = len(np.unique(finite))

    def quantile(self, q: float) -> float:
        return float(np.quantile(self._sorted, q, method="inverted_cdf"))

    def quantiles(self, n_bins: int) -> list[float]:
        return [self.quantile(i / n_bins) for i in range(1, n_bins)]


class ExactStats:
    def __init__(self, columns: dict[str, np.ndarray]) -> None:
        self.rows = len(next(iter(columns.values())))
        self.columns = {name: ExactColumn(name, values) for name, values in columns.items()}

    def __getitem__(self, name: str) -> ExactColumn:
        return self.columns[name]


def stats_of(dataset: Any, *, categorical: Sequence[str] = (), label: str | None = None, **options: Any) -> Any:
    """``compute_stats`` of a (tiny) dataset; ``options`` go to it (e.g. ``quantile_k``)."""
    return compute_stats(dataset, categorical=list(categorical) or None, label=label, **options)
