"""Statistics for the tests of what is built from them (layers, transforms, sampling).

``stats_of(dataset, ...)`` uses ``streamfeed.stats.compute_stats`` when that
package is present. Until it is, it falls back to :class:`ExactStats`: the
same read-only API (``stats[col].mean``, ``.quantiles(n)``, ``.vocabulary``,
``stats.label_counts``...) computed exactly with NumPy from the whole
(tiny) dataset. The consumers only read that API, so either works; the
tests' expected values are always recomputed from the raw data.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

import numpy as np


class ExactColumn:
    def __init__(self, name: str, values: np.ndarray, kind: str) -> None:
        self.name, self.kind, self.dtype = name, kind, str(values.dtype)
        self.count = len(values)
        if kind == "numeric":
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
            self.vocabulary = []
        else:
            counts = Counter(v.item() if isinstance(v, np.generic) else v for v in values if v is not None)
            self.vocabulary = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
            self.distinct = len(counts)
            self.nulls = sum(v is None for v in values)
        self.vocabulary_exact, self.oov_count = True, 0

    def quantile(self, q: float) -> float:
        return float(np.quantile(self._sorted, q, method="inverted_cdf"))

    def quantiles(self, n_bins: int) -> list[float]:
        return [self.quantile(i / n_bins) for i in range(1, n_bins)]


class ExactStats:
    def __init__(self, columns: dict[str, np.ndarray], categorical: Sequence[str] = (), label: str | None = None) -> None:
        self.rows = len(next(iter(columns.values())))
        self.columns = {
            name: ExactColumn(name, values, "categorical" if name in categorical or name == label or values.dtype.kind in "OSU" else "numeric")
            for name, values in columns.items()
        }
        self.label = label
        self.label_counts = dict(self.columns[label].vocabulary) if label else {}

    def __getitem__(self, name: str) -> ExactColumn:
        return self.columns[name]


def stats_of(dataset: Any, *, categorical: Sequence[str] = (), label: str | None = None, **options: Any) -> Any:
    """Stats of a (tiny) dataset; ``options`` go to ``compute_stats`` (e.g. ``quantile_k``)."""
    try:
        from streamfeed.stats import compute_stats
    except ImportError:
        compute_stats = None
    if compute_stats is not None:
        return compute_stats(dataset, categorical=list(categorical) or None, label=label, **options)
    with dataset.iter_epoch(0) as stream:
        chunks = list(stream)
    columns = {name: np.concatenate([chunk[name] for chunk in chunks]) for name in chunks[0]}
    return ExactStats(columns, categorical, label)
