"""The quality report's one pass over tabular data: fragments summarised in threads, merged in order.

Fragments are read by the dataset's one fragment pass
(``Dataset.fragment_pass``: its per-fragment ops, error policy and decode
bound apply) in a thread pool, at most ``2 * threads`` ahead, as
``compute_stats`` and the row count after filters read them.
Each read thread summarises its fragment: null, NaN and inf counts, whether
each column is constant, one hash per row, and the label's moments or
class counts (with the statistics' own ``Moments`` and ``count_values``).
The calling thread merges the summaries in fragment order, so the result
does not depend on the thread count, and keeps what needs global row
numbers or a fixed order: the thinned sample of the row-order test and the
HyperLogLog sketch of the row hashes.

Nulls are the masked entries of a column: a source opened with
``nulls="mask"`` yields masked arrays for columns with nulls (NaN stays a
value), so nulls and NaN are counted apart, before any null policy. NaT in
a NumPy ``datetime64`` column (from a dataset's ``map``) is a null too, and
such a column joins the row-order test as seconds since the epoch (the
sources yield their date columns so already).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core import Chunk, chunk_len, slice_chunk
from ..core_ragged import Ragged
from ..errors import require
from ..files.arrow import datetime64_seconds
from ..pipeline import Dataset
from ..stats.moments import Moments, merge_max, merge_min, min_max
from ..stats.vocabulary import count_values
from .hashing import row_hash
from .order import ThinnedSample
from .progress import progress

HLL_LG_K = 14  # 2**14 registers: relative standard error 1.04 / 2**7 = 0.81 %
ORDER_SAMPLE = 65_536  # rows kept (evenly thinned) for the row-order correlation
MAX_LABEL_CLASSES = 10_000


def _data(column: Any) -> Any:
    """A column's values without its mask (a list column as it is: it has no mask)."""
    return column if isinstance(column, Ragged) else np.ma.getdata(column)


def _rows_with(found: np.ndarray, lengths: np.ndarray) -> int:
    """Rows of a list column (``lengths`` long each, end to end) holding at least one ``found`` element."""
    running = np.concatenate([[0], np.cumsum(found, dtype=np.int64)])
    ends = np.cumsum(lengths)
    return int(np.count_nonzero(running[ends] - running[ends - lengths]))


def _equal(values: np.ndarray, first: Any) -> np.ndarray:
    """Where ``values`` equal ``first``, NaN equal to NaN."""
    same = np.asarray(values == first)
    if values.dtype.kind == "f":
        same |= np.isnan(values) & np.isnan(first)
    return same


@dataclass
class ColumnCounts:
    """One column's nulls (rows), NaN and inf values, and whether every value equals ``first``.

    ``datetime``: the NumPy type of a ``datetime64``/``timedelta64`` column (None otherwise).
    """

    dtype: str
    datetime: str | None = None
    nulls: int = 0
    nans: int = 0
    infs: int = 0
    first: Any = None
    constant: bool = True

    @classmethod
    def of(cls, column: np.ndarray | Ragged) -> "ColumnCounts":
        """The counts of one fragment's column (masked entries are nulls; a list column counts the rows
        holding a NaN or an inf, and is constant when every row is the first row)."""
        if isinstance(column, Ragged):
            return cls._of_lists(column)
        values = np.ma.getdata(column)
        temporal = values.dtype.kind in "mM"
        counts = cls(str(values.dtype), str(values.dtype) if temporal else None)
        if not len(values):
            return counts
        masked = np.ma.getmaskarray(column).reshape(len(values), -1) if np.ma.isMaskedArray(column) else None
        if temporal:
            nat = np.isnat(values).reshape(len(values), -1)
            masked = nat if masked is None else masked | nat
        if masked is not None:
            counts.nulls = int(np.count_nonzero(masked.any(axis=1)))
        if values.dtype.kind in "fc":
            nan = np.isnan(values).reshape(len(values), -1)
            counts.nans = int(np.count_nonzero(nan if masked is None else nan & ~masked))
            counts.infs = int(np.count_nonzero(np.isinf(values)))
        counts.first = values[0]
        counts.constant = bool(np.all(_equal(values, values[0])))
        return counts

    @classmethod
    def _of_lists(cls, column: Ragged) -> "ColumnCounts":
        flat, lengths = column.flat(), column.lengths()
        counts = cls(f"list<{flat.dtype}>")
        if not len(column):
            return counts
        if flat.dtype.kind in "fc":  # rows holding a NaN (an inf), as a row's share is what the report shows
            counts.nans, counts.infs = _rows_with(np.isnan(flat), lengths), _rows_with(np.isinf(flat), lengths)
        first = column.row(0)
        counts.first = f"{len(first)}:{(first + 0 if first.dtype.kind == 'f' else first).tobytes().hex()}"
        same_length = bool(np.all(lengths == len(first)))
        counts.constant = same_length and bool(np.all(_equal(flat.reshape(len(column), len(first)), first)))
        return counts

    def merge(self, other: "ColumnCounts") -> None:
        """Adds a later fragment's counts (``other`` has rows)."""
        self.nulls, self.nans, self.infs = self.nulls + other.nulls, self.nans + other.nans, self.infs + other.infs
        self.constant = self.constant and other.constant and bool(np.all(_equal(np.asarray(other.first), self.first)))


@dataclass
class LabelSummary:
    """The label's distribution in memory that does not grow with the rows.

    A floating-point label is a regression target: its moments and range,
    not value counts. A discrete label is counted per class until it has
    more than ``MAX_LABEL_CLASSES`` classes (``counts`` is then None).
    """

    moments: Moments = field(default_factory=Moments)
    low: Any = None
    high: Any = None
    counts: dict[Any, int] | None = field(default_factory=dict)

    @classmethod
    def of(cls, values: np.ndarray) -> "LabelSummary":
        """One fragment's label values: moments of the finite ones if floating, else counts per class."""
        if values.dtype.kind == "f":
            finite = values[np.isfinite(values)].astype(np.float64)
            return cls(Moments.of(finite), *min_max(finite))
        return cls(counts=dict(zip(*count_values(values))))

    def merge(self, other: "LabelSummary") -> None:
        """Adds a later fragment's summary."""
        self.moments = self.moments.merge(other.moments)
        self.low, self.high = merge_min(self.low, other.low), merge_max(self.high, other.high)
        if self.counts is None or other.counts is None:
            self.counts = None
            return
        for value, count in other.counts.items():
            self.counts[value] = self.counts.get(value, 0) + count
        if len(self.counts) > MAX_LABEL_CLASSES:
            self.counts = None

    def result(self, column: str | None) -> dict | None:
        """The report's ``label`` entry: moments, class counts, or too many classes; None without values."""
        if self.moments.count:
            return {
                "column": column,
                "kind": "continuous",
                "mean": float(self.moments.mean),
                "std": float(np.sqrt(self.moments.variance)),
                "min": self.low,
                "max": self.high,
            }
        if self.counts is None:
            return {"column": column, "kind": "discrete", "classes": f"more than {MAX_LABEL_CLASSES:,}"}
        if not self.counts:
            return None
        counts = dict(sorted(self.counts.items(), key=lambda item: -item[1]))
        ratio = max(counts.values()) / min(counts.values())
        return {"column": column, "kind": "classes", "counts": counts, "imbalance_ratio": ratio}


@dataclass
class FragmentSummary:
    """What a read thread found in one fragment; ``chunk`` (nulls masked) stays for the calling thread's share."""

    chunk: Chunk
    rows: int
    columns: dict[str, ColumnCounts]
    hashes: np.ndarray
    label: LabelSummary | None

    @classmethod
    def of(cls, chunk: Chunk, label: str | None) -> "FragmentSummary":
        """Summarises a fragment's chunk (in a read thread)."""
        values = {name: _data(column) for name, column in chunk.items()}
        return cls(
            chunk=chunk,
            rows=chunk_len(chunk),
            columns={name: ColumnCounts.of(column) for name, column in chunk.items()},
            hashes=row_hash(values),
            label=LabelSummary.of(values[label]) if label is not None and label in values else None,
        )


class QualityTotals:
    """The merged summaries of the fragments read so far, in fragment order."""

    def __init__(self) -> None:
        self.rows = 0
        self.columns: dict[str, ColumnCounts] = {}
        self.sketch = require("datasketches", "quality").hll_sketch(HLL_LG_K)
        self.thinned = ThinnedSample(ORDER_SAMPLE)
        self.label = LabelSummary()

    def add(self, part: FragmentSummary) -> None:
        """Merges the next fragment's summary: counts, the row hashes into the sketch, the thinned sample."""
        for name, counts in part.columns.items():
            if name in self.columns:
                self.columns[name].merge(counts)
            else:
                self.columns[name] = counts
        collections.deque(map(self.sketch.update, part.hashes.view(np.int64).tolist()), maxlen=0)
        values = {name: _data(column) for name, column in part.chunk.items()}
        plain = {
            name: datetime64_seconds(column) if column.dtype.kind in "mM" else column
            for name, column in values.items()
            if not isinstance(column, Ragged) and column.ndim == 1 and column.dtype.kind in "iufbmM"
        }
        if plain:
            self.thinned.add(self.rows, plain)
        if part.label is not None:
            self.label.merge(part.label)
        self.rows += part.rows


def quality_pass(
    dataset: Dataset,
    *,
    label: str | None,
    max_rows: int | None,
    progress_bar: bool | None,
    threads: int | None = None,
) -> QualityTotals:
    """Reads ``dataset``'s fragments (up to ``max_rows`` rows) in ``threads`` threads; merges their summaries in order.

    The dataset's one fragment pass (``Dataset.fragment_pass``): its
    per-fragment ops, bad-input report and decode bound apply;
    ``progress_bar`` as :func:`~.progress.progress`'s ``enabled``.
    """
    totals = QualityTotals()
    expected = sum(fragment.num_rows for fragment in dataset.source.fragments)
    total = expected if max_rows is None else min(expected, max_rows)
    with progress(total, "quality pass", unit="rows", enabled=progress_bar) as advance:
        parts = dataset.fragment_pass(
            lambda _, chunk: FragmentSummary.of(chunk, label), threads=threads, name="quality"
        )
        try:
            for part in parts:
                if part is None or part.rows == 0:
                    continue
                if max_rows is not None and totals.rows + part.rows > max_rows:
                    part = FragmentSummary.of(slice_chunk(part.chunk, 0, max_rows - totals.rows), label)
                totals.add(part)
                advance(part.rows)
                if max_rows is not None and totals.rows >= max_rows:
                    break
        finally:
            parts.close()  # stops the pass's threads when the sample is complete
    return totals
