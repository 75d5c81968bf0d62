"""A list column's statistics: its rows' lengths and its elements, in the one pass.

A list column (``core_ragged.Ragged``: token ids, a session's events, a
sensor trace) is described twice over. Its *rows* by their lengths (an
exact histogram, ``stats/lengths.py``: percentiles, the padding a batch
costs, proposed bucket boundaries). Its *elements* as a column of their
own, by a :class:`~streamfeed.stats.accumulate.ColumnAccumulator` over the
flat values: integer and bool elements are categorical (a token
vocabulary, with its exact counts up to ``max_vocabulary``), floats
numeric (moments, quantiles). ``min``/``max`` of the record are the
elements' (an ``Embedding`` needs ``max + 1`` ids), ``count`` the rows.

Cost: one ``np.diff`` and ``np.unique`` of the row lengths per fragment,
plus the element column's own cost per value.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core_ragged import Ragged
from .accumulate import ColumnAccumulator
from .lengths import count_lengths, length_quantile, merge_histograms
from .moments import merge_max, merge_min, min_max
from .sketches import PositionSampler

LENGTH_QUANTILES = (0.5, 0.9, 0.95, 0.99)
"""The length percentiles a record shows (any other: ``ColumnStats.length_quantile``)."""


def is_list_column(values: Any) -> bool:
    """Whether a chunk's column is variable-length rows."""
    return isinstance(values, Ragged)


def list_dtype(values: Ragged) -> str:
    """``list<int32>``: the element type as the schema would name it."""
    return f"list<{values.values.dtype}>"


class SequenceAccumulator:
    """Everything known about one list column after some fragments: length histogram and element summary."""

    kind = "sequence"

    def __init__(self, name: str, dtype: str, element: ColumnAccumulator) -> None:
        self.name, self.dtype = name, dtype
        self.element = element
        self.rows = 0
        self.histogram: dict[int, int] = {}
        self.bin_width = 1
        self.min: Any = None
        self.max: Any = None

    @property
    def sample(self) -> Any:
        """The element column's quantile sample (compacted and thresholded like any column's)."""
        return self.element.sample

    def add(self, values: Any, sampler: PositionSampler | None = None) -> None:
        """Adds one fragment's rows (a ``Ragged``): their lengths to the histogram, their elements to the elements'."""
        lengths = values.lengths()
        self.rows += int(lengths.size)
        part = count_lengths(lengths, self.bin_width)
        self.histogram, self.bin_width = merge_histograms(self.histogram, self.bin_width, part, self.bin_width)
        flat = values.flat()
        if flat.size:
            low, high = min_max(flat[~np.isnan(flat)] if flat.dtype.kind == "f" else flat)
            self.min, self.max = merge_min(self.min, low), merge_max(self.max, high)
            self.element.add(flat, sampler)

    def merge(self, other: "SequenceAccumulator", cache: dict | None = None) -> None:
        """Adds ``other`` (a later fragment's summary) into this one."""
        self.rows += other.rows
        self.histogram, self.bin_width = merge_histograms(
            self.histogram, self.bin_width, other.histogram, other.bin_width
        )
        self.min, self.max = merge_min(self.min, other.min), merge_max(self.max, other.max)
        self.element.merge(other.element, cache)

    def to_record(self) -> dict:
        """The JSON-able fields of ``ColumnStats`` for a list column (``lengths`` and ``element`` set)."""
        record = ColumnAccumulator(self.name, "numeric", self.dtype, max_vocabulary=1).to_record()
        lengths = None
        if self.histogram:
            keys = sorted(self.histogram)
            total = sum(length * self.histogram[length] for length in keys)
            lengths = {
                "min": int(keys[0]),
                "max": int(keys[-1]),
                "mean": total / self.rows,
                "values": int(total),
                "bin_width": self.bin_width,
                "quantiles": {str(q): length_quantile(self.histogram, q) for q in LENGTH_QUANTILES},
                "histogram": [[int(length), int(self.histogram[length])] for length in keys],
            }
        record.update(
            kind="sequence",
            count=self.rows,
            min=_py(self.min),
            max=_py(self.max),
            lengths=lengths,
            element=self.element.to_record(),
        )
        return record


def _py(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value
