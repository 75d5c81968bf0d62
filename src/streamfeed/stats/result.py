"""The frozen statistics: :class:`ColumnStats` per column and :class:`Stats`.

Plain data read back from (and written to) versioned JSON. Quantiles are
answered from the stored order statistics of a deterministic sample
(``quantile_points``; see ``sketches.py`` for the bound) or, for files
computed with ``quantiles="kll"`` (and older files), from the stored KLL
sketch, so nothing needs the data again.

Dates and times are numbers here, as the pipeline yields them (float64
seconds since 1970-01-01 UTC); ``ColumnStats.datetime`` keeps the original
type, ``min_datetime``/``max_datetime`` give the range as dates and the
JSON shows it as ISO 8601 text (``min_iso``, ``max_iso``). Python dates in
a vocabulary or label counts are written as ISO 8601 text and read back
as dates.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Sequence

from ..errors import ArgumentError, SchemaError, UnknownNameError, describe
from ..files.atomic import write_atomic
from .io import check_source
from .lengths import bucket_rows, length_quantile, padding_waste, propose_boundaries
from .sketches import kll_from_text, point_quantile, points_from_text
from .vocabulary import ENCODED_IN_JSON, decode, encode

VERSION = 1
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_DATES = ("date", "timestamp", "datetime64")  # original types whose seconds count from the epoch


def check_version(data: Mapping[str, Any]) -> None:
    """Raises unless ``data`` is a statistics file of the version this code writes."""
    if data.get("version") != VERSION:
        raise SchemaError(
            describe(
                "Unknown statistics file version",
                expected=f"version {VERSION}",
                found=str(data.get("version")),
                fix="recompute the statistics with this streamfeed (streamfeed stats SRC -o stats.json)",
            )
        )


_LIST_FIELDS = ("lengths", "element")


@dataclass
class ColumnStats:
    """Statistics of one column.

    ``count`` is the number of non-null, non-NaN values (for images: of
    images); numeric columns with several values per row (fixed-size lists)
    are summarised over all their values. ``variance`` is the population
    variance (ddof=0). ``vocabulary`` lists ``(value, count)`` by count
    descending then value ascending: the ``vocabulary_cap`` most frequent
    (``vocabulary_truncated`` when values were left out); counts exact when
    ``vocabulary_exact``. ``oov_count`` counts values outside the kept
    vocabulary. ``distinct`` is an integer (an estimate past
    ``max_vocabulary``, or from HyperLogLog for numeric columns).

    ``datetime`` is the original type of a date, timestamp, time or
    duration column (``"timestamp[ms, tz=UTC]"``, ``"date32[day]"``,
    ``"datetime64[s]"``, ...): its values, and so ``min``, ``max``, ``mean``
    and the quantiles, are float64 seconds (since 1970-01-01 UTC for dates
    and timestamps), as the pipeline yields them. None for other columns.

    A list column (``kind == "sequence"``, ``dtype`` ``list<...>``): ``count``
    counts its rows, ``min``/``max`` are its elements' (an ``Embedding``
    needs ``max + 1`` ids), ``lengths`` holds its rows' length histogram
    (``[[length, rows], ...]``, exact while ``bin_width`` is 1), their
    ``min``, ``max``, ``mean``, ``values`` and percentiles, and
    :attr:`element_stats` describes the elements as a column (integers as
    a categorical vocabulary, floats as numbers). See
    :meth:`length_quantile`, :meth:`padding_waste`, :meth:`bucket_boundaries`.
    """

    name: str
    kind: Literal["numeric", "categorical", "image", "sequence"]
    dtype: str
    count: int = 0
    nulls: int = 0
    nans: int = 0
    min: Any = None
    max: Any = None
    mean: float | None = None
    variance: float | None = None
    quantile_rank_error: float | None = None
    distinct: int | None = None
    datetime: str | None = None
    vocabulary: list[tuple[Any, int]] | None = None
    vocabulary_exact: bool | None = None
    vocabulary_truncated: bool | None = None
    vocabulary_cap: int | None = None
    oov_count: int | None = None
    value_type: str | None = None
    channel_mean: list[float] | None = None
    channel_std: list[float] | None = None
    image_sizes: dict | None = None
    image_modes: dict | None = None
    kll: str | None = field(default=None, repr=False)
    kll_kind: str | None = field(default=None, repr=False)
    quantile_method: str | None = None
    quantile_points: str | None = field(default=None, repr=False)
    quantile_sample_size: int | None = None
    lengths: dict | None = field(default=None, repr=False)
    element: dict | None = field(default=None, repr=False)
    _sketch: Any = field(default=None, repr=False, compare=False)

    @property
    def std(self) -> float | None:
        """Population standard deviation."""
        return None if self.variance is None else math.sqrt(self.variance)

    @property
    def is_date(self) -> bool:
        """A date or timestamp column: its values are seconds since 1970-01-01 UTC."""
        return self.datetime is not None and self.datetime.startswith(_DATES)

    def as_datetime(self, seconds: float | None) -> dt.datetime | None:
        """``seconds`` of this date column as an aware UTC ``datetime`` (None for other columns)."""
        if seconds is None or not self.is_date or not math.isfinite(seconds):
            return None
        return _EPOCH + dt.timedelta(seconds=float(seconds))

    @property
    def min_datetime(self) -> dt.datetime | None:
        """The earliest value of a date or timestamp column, UTC."""
        return self.as_datetime(self.min)

    @property
    def max_datetime(self) -> dt.datetime | None:
        """The latest value of a date or timestamp column, UTC."""
        return self.as_datetime(self.max)

    def _kll(self):
        if self.kll is None:
            raise ArgumentError(
                describe(
                    f"Column {self.name!r} ({self.kind}) has no quantile summary",
                    expected="a numeric column with values, computed with quantiles='sample' or 'kll'",
                )
            )
        if self._sketch is None:
            self._sketch = kll_from_text(self.kll, self.kll_kind or "doubles")
        return self._sketch

    def quantile(self, q: float) -> float:
        """The approximate ``q``-quantile: a value with a fraction ``q`` of the values below it,
        within ``quantile_rank_error`` in rank (0 and 1 give the exact min and max)."""
        if not 0.0 <= q <= 1.0:
            raise ArgumentError(describe("q is a share of the values", expected="a number in [0, 1]", found=str(q)))
        if self.quantile_points is None:
            return float(self._kll().get_quantile(q))
        if q == 0.0 and self.min is not None:
            return float(self.min)
        if q == 1.0 and self.max is not None:
            return float(self.max)
        if self._sketch is None:
            self._sketch = points_from_text(self.quantile_points)
        return point_quantile(self._sketch, int(self.quantile_sample_size or self._sketch.size), q)

    def quantiles(self, n_bins: int) -> list[float]:
        """``n_bins - 1`` boundaries splitting the values into equally frequent bins."""
        if n_bins < 1:
            raise ArgumentError(describe("n_bins counts bins", expected=">= 1", found=str(n_bins)))
        return [self.quantile(i / n_bins) for i in range(1, n_bins)]

    # ------------------------------------------------------------ list columns
    @property
    def element_stats(self) -> "ColumnStats":
        """A list column's elements described as a column of their own."""
        if self.element is None:
            raise ArgumentError(describe(f"Column {self.name!r} ({self.kind}) is not a list column"))
        return ColumnStats.from_dict(self.element)

    def _histogram(self) -> dict[int, int]:
        if self.lengths is None:
            raise ArgumentError(
                describe(
                    f"Column {self.name!r} ({self.kind}) has no row lengths",
                    expected="a list column with rows (kind 'sequence')",
                )
            )
        return {int(length): int(rows) for length, rows in self.lengths["histogram"]}

    def length_quantile(self, q: float) -> int:
        """The smallest row length with a share ``q`` of the rows at or below it (exact while ``bin_width`` is 1)."""
        return length_quantile(self._histogram(), q)

    def bucket_rows(self, boundaries: Sequence[int]) -> list[int]:
        """Rows of each bucket for inclusive upper ``boundaries`` (one more bucket than boundaries)."""
        return bucket_rows(self._histogram(), boundaries)

    def padding_waste(self, boundaries: Sequence[int] = ()) -> float:
        """The share of pad slots when rows are padded to their bucket's boundary (none given: to the longest)."""
        return padding_waste(self._histogram(), boundaries)

    def bucket_boundaries(self, buckets: int) -> list[int]:
        """Inclusive upper lengths of ``buckets`` buckets that leave the fewest pad slots (``stats/lengths.py``),
        the last the longest row: ``sf.Bucket(column, boundaries=..., batch_sizes=...)`` takes them as they are."""
        histogram = self._histogram()
        return [*propose_boundaries(histogram, buckets), max(histogram)] if histogram else []

    def to_dict(self) -> dict:
        data = {name: getattr(self, name) for name in self.__dataclass_fields__ if not name.startswith("_")}
        for name in _LIST_FIELDS:  # only a list column's record has them: other columns' JSON is as before
            if data[name] is None:
                del data[name]
        if self.vocabulary is not None:
            kind = self.value_type or "str"
            data["vocabulary"] = [
                [encode(v, kind) if kind in ENCODED_IN_JSON else v, int(c)] for v, c in self.vocabulary
            ]
        if self.is_date:  # for people reading the file; the seconds are what is read back
            for end in ("min", "max"):
                moment = self.as_datetime(data[end])
                data[f"{end}_iso"] = None if moment is None else moment.isoformat()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ColumnStats":
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__ and not k.startswith("_")}
        if known.get("distinct") is not None:
            known["distinct"] = int(round(known["distinct"]))  # older files wrote floats
        if known.get("vocabulary") is not None:
            kind = known.get("value_type") or "str"
            known["vocabulary"] = [(decode(v, kind), int(c)) for v, c in known["vocabulary"]]
        return cls(**known)


@dataclass
class Stats:
    """Statistics of a whole dataset: rows, columns, the label distribution, its source."""

    rows: int
    columns: dict[str, ColumnStats]
    label: str | None = None
    label_counts: dict[Any, int] | None = None
    source: dict = field(default_factory=dict)
    label_type: str | None = None
    warnings: list[str] = field(default_factory=list)

    def __getitem__(self, name: str) -> ColumnStats:
        try:
            return self.columns[name]
        except KeyError:
            known = f"one of {sorted(self.columns)}"
            raise UnknownNameError(describe(f"No statistics for column {name!r}", expected=known)) from None

    def to_dict(self) -> dict:
        kind = self.label_type or "str"
        label_counts = None
        if self.label_counts is not None:
            label_counts = [
                [encode(v, kind) if kind in ENCODED_IN_JSON else v, int(c)] for v, c in self.label_counts.items()
            ]
        return {
            "version": VERSION,
            "source": self.source,
            "rows": self.rows,
            "label": self.label,
            "label_type": self.label_type,
            "label_counts": label_counts,
            "columns": {name: column.to_dict() for name, column in self.columns.items()},
            "warnings": list(self.warnings),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Stats":
        check_version(data)
        kind = data.get("label_type") or "str"
        counts = data.get("label_counts")
        return cls(
            rows=int(data["rows"]),
            columns={name: ColumnStats.from_dict(column) for name, column in data["columns"].items()},
            label=data.get("label"),
            label_counts=None if counts is None else {decode(v, kind): int(c) for v, c in counts},
            source=dict(data.get("source") or {}),
            label_type=data.get("label_type"),
            warnings=[str(warning) for warning in data.get("warnings") or []],
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, default=_json_value)

    def save(self, path: str | os.PathLike) -> None:
        """Writes the JSON whole or not at all: made in memory first (a value JSON cannot hold raises and
        writes nothing), then published by :func:`~streamfeed.files.atomic.write_atomic` (never through a link)."""
        write_atomic(path, self.to_json())

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Stats":
        with open(path, encoding="utf-8") as handle:
            return cls.from_dict(json.load(handle))

    def check_source(self, dataset: Any) -> None:
        """Raises :class:`StaleStatsError` naming what changed if ``dataset``'s source differs."""
        check_source(self.source, dataset)


def _json_value(value: Any) -> Any:
    """Values ``json`` cannot write that statistics may still hold: NumPy scalars and arrays, dates as ISO 8601."""
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (dt.date, dt.time)):  # a datetime is a date
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    raise SchemaError(
        describe(
            "The statistics hold a value JSON cannot write; nothing was written",
            expected="numbers, text, bytes, dates and times",
            found=f"{type(value).__name__}: {value!r:.80}",
            fix="describe such a column after a map that turns it into numbers or text",
        )
    )
