"""Per-fragment column summaries and their merge.

One :class:`ColumnAccumulator` per column and fragment, built from the
fragment's chunk in a read thread, then merged into the running total in
fragment order by the caller. Numeric columns of any shape (scalars or
fixed-size lists ``(n, d)``) are summarised over *all* their values;
columns of shape ``(n, h, w, c)`` are images, summarised per channel.

Dates and times are numeric: the Arrow sources yield them as float64
seconds since the epoch, UTC (``files/arrow.py``), and a NumPy
``datetime64``/``timedelta64`` column (from a ``map``, say) is converted
the same way here, NaT counted as a null. Their statistics are in the
seconds a model sees; ``datetime`` records the original type.

A stored vocabulary is capped (:data:`VOCABULARY_CAP` values, the most
frequent), and a column whose values are mostly distinct keeps only
:data:`IDENTIFIER_VOCABULARY` (see :func:`vocabulary_cap`).
"""

from __future__ import annotations

import re
from typing import Any, Literal

import numpy as np

from ..files.arrow import datetime64_seconds
from .moments import Moments, merge_max, merge_min, min_max
from .sketches import (
    QUANTILE_SAMPLE,
    PositionSampler,
    QuantileSample,
    hll_estimate,
    hll_registers,
    kll_kind,
    kll_rank_error,
    kll_to_text,
    new_kll,
    points_to_text,
    quantile_points,
    sample_rank_error,
    update_kll,
)
from .vocabulary import Vocabulary, arrow_text_type, count_present, is_arrow_text, none_mask

Kind = Literal["numeric", "categorical", "image"]
QUANTILE_METHODS = ("sample", "kll", "none")
DISTINCT_MODES = ("categorical", "all", "none")

VOCABULARY_CAP = 10_000
"""Values a stored vocabulary keeps by default (the most frequent): about 0.4 MB of JSON. Past it,
values are rare (a 10,001st value is seen in at most 1/10,001 of the rows) and an embedding or
lookup of them learns little; their rows are counted in ``oov_count``."""
IDENTIFIER_VOCABULARY = 100
"""Values kept for a column whose values are mostly distinct (:func:`identifier_like`): enough to
show its commonest values (a placeholder such as "unknown" stands out), no table-sized copy."""
IDENTIFIER_NAMES = frozenset({"path", "file", "filename"})
"""Text columns by these names say where a row came from (``read_images``' ``path``): identifiers,
not categories. Their values are counted but no vocabulary is built (a copy of the column, of no use
to a model) unless ``categorical=`` names them."""
IDENTIFIER_MIN_DISTINCT = 1_000
IDENTIFIER_SHARE = 0.5
_DATE_TEXT = re.compile(
    r"^\s*(\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}|\d{1,2}[ -][A-Za-z]{3,9}\.?[ -]\d{2,4}"
    r"|[A-Za-z]{3,9}\.? \d{1,2},? \d{4})([ T]\d{1,2}:\d{2}(:\d{2}([.,]\d+)?)?\s*([AaPp][Mm])?)?"
    r"\s*(Z|[+-]\d{2}:?\d{2}|UTC|GMT)?\s*$"
)

_ISO_DATE = re.compile(r"^\s*\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}([.,]\d+)?)?)?\s*(Z|[+-]\d{2}:?\d{2})?\s*$")


def identifier_like(distinct: int, count: int) -> bool:
    """More than half of the values distinct (and over a thousand of them): an identifier, free text
    or a date kept as text rather than a category, whose vocabulary would be a copy of the column."""
    return distinct > max(IDENTIFIER_MIN_DISTINCT, IDENTIFIER_SHARE * count)


def vocabulary_cap(distinct: int, count: int, cap: int, *, named: bool) -> int:
    """How many values a column's stored vocabulary keeps.

    ``cap`` for every categorical column; :data:`IDENTIFIER_VOCABULARY` for
    one that is :func:`identifier_like`, unless the user ``named`` it
    categorical (then its vocabulary is wanted: it keeps ``cap``).
    """
    if not named and identifier_like(distinct, count):
        return min(cap, IDENTIFIER_VOCABULARY)
    return cap


def looks_like_dates(values: list) -> str | None:
    """The first of ``values`` if most of the first 20 are text written like a date, else None."""
    texts = [value for value in values[:20] if isinstance(value, str)]
    dated = [text for text in texts if _DATE_TEXT.match(text)]
    return dated[0] if texts and len(dated) >= 0.8 * len(texts) else None


def vocabulary_warning(record: dict, identifier: bool) -> str:
    """What a truncated vocabulary (a :meth:`ColumnAccumulator.to_record` record) left out, and what to do."""
    name, distinct, count, cap = record["name"], record["distinct"], record["count"], record["vocabulary_cap"]
    about = "" if record["vocabulary_exact"] else "about "
    share = (count - record["oov_count"]) / count if count else 0.0
    kept = f"its vocabulary keeps the {cap:,} most frequent ({share:.1%} of the values; vocabulary_truncated)"
    if not identifier:
        return (
            f"column {name!r} has {about}{distinct:,} distinct values: {kept}; "
            "to keep more, raise vocabulary_cap= (and max_vocabulary=, the values counted exactly)"
        )
    message = (
        f"column {name!r} has {about}{distinct:,} distinct values in {count:,}: an identifier, free text or "
        f"a date kept as text, not a category; {kept}"
    )
    example = looks_like_dates([value for value, _ in record["vocabulary"] or []])
    as_date = f"column_types={{{name!r}: 'timestamp[s]'}}"
    if example is not None and _ISO_DATE.match(example):
        message += (
            f"; it looks like dates (e.g. {example!r}): read it as a date (read_csv({as_date}), or a date "
            "type in Parquet) and streamfeed yields float64 seconds since the epoch, UTC"
        )
    elif example is not None:
        message += (
            f"; it looks like dates (e.g. {example!r}) but not in ISO 8601 (2021-01-31T12:00:00), the form "
            f"read_csv reads as dates: rewrite them so and pass {as_date} (float64 seconds since the epoch, "
            "UTC), or parse them in a map"
        )
    elif record["value_type"] == "str":
        message += f"; to keep its whole vocabulary anyway, name it: categorical=[{name!r}]"
    return message


def is_identifier(name: str, values: Any, categorical: set[str]) -> bool:
    """Whether a column is an identifier by its name (:data:`IDENTIFIER_NAMES`): text, and not named categorical."""
    text = is_arrow_text(values) or values.dtype.kind in "OUS"
    return name in IDENTIFIER_NAMES and name not in categorical and text


def column_kind(name: str, values: Any, categorical: set[str]) -> Kind:
    """Categorical for strings, bytes, bools and named columns; image for 4-D; else numeric.

    ``values`` is a NumPy array or an Arrow text column (:func:`is_arrow_text`).
    """
    if name in categorical or is_arrow_text(values) or values.dtype.kind in "OUSb":
        return "categorical"
    if values.ndim == 4:
        return "image"
    return "numeric"


def dtype_name(values: Any) -> str:
    if is_arrow_text(values):
        return arrow_text_type(values)
    if values.dtype.kind == "O":
        for value in values.reshape(-1)[:64]:
            if value is not None:
                return type(value).__name__
        return "object"
    return str(values.dtype)


def _nulls(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Values without None (object columns), and how many None there were."""
    if values.dtype.kind != "O":
        return values, 0
    missing = none_mask(values)
    count = int(missing.sum())
    return (values[~missing] if count else values), count


class ColumnAccumulator:
    """Everything known about one column after some fragments."""

    def __init__(
        self,
        name: str,
        kind: Kind,
        dtype: str,
        *,
        max_vocabulary: int,
        quantile_k: int = 200,
        quantiles: str = "sample",
        quantile_sample: int = QUANTILE_SAMPLE,
        distinct: str = "categorical",
        datetime: str | None = None,
        vocabulary_cap: int = VOCABULARY_CAP,
        named: bool = False,
        identifier: bool = False,
    ) -> None:
        self.name, self.kind, self.dtype = name, kind, dtype
        self.identifier = identifier  # is_identifier: values counted, no vocabulary built
        self.values = 0  # values counted of an identifier column
        self.datetime = datetime  # the original date/time type of a column of seconds
        self.vocabulary_cap, self.named = vocabulary_cap, named  # named: categorical=[...] lists it
        self.max_vocabulary, self.quantile_k = max_vocabulary, quantile_k
        self.quantile_method, self.distinct_mode = quantiles, distinct
        self.nulls = 0
        self.nans = 0
        self.moments = Moments()
        self.channels = Moments()
        self.min: Any = None
        self.max: Any = None
        self.kll = None
        self.sample: QuantileSample | None = None
        self.quantile_sample = int(quantile_sample)
        self._adds = 0  # fragment keys when add() is called without a sampler
        self.registers: np.ndarray | None = None
        self.vocabulary: Vocabulary | None = None

    # ---------------------------------------------------------------- update
    def add(self, values: Any, sampler: PositionSampler | None = None) -> None:
        """Adds one fragment's ``values``; ``sampler`` keys their positions for the quantile sample
        (default: a private fragment counter, unique only within this accumulator).
        An Arrow text column (:func:`is_arrow_text`) is counted without becoming Python objects."""
        if self.identifier and is_arrow_text(values):
            self.nulls += values.null_count
            self.values += len(values) - values.null_count
            return
        if self.kind == "categorical" and not self.identifier:  # the None are found as the values are counted
            uniques, counts, nulls = count_present(values.reshape(-1) if getattr(values, "ndim", 1) > 1 else values)
            self.nulls += nulls
            self.vocabulary = self.vocabulary or Vocabulary(self.max_vocabulary)
            self.vocabulary.add(uniques, counts)
            return
        values, nulls = _nulls(values)
        self.nulls += nulls
        nat = 0
        if values.dtype.kind in "mM" and self.kind != "categorical":
            self.datetime = self.datetime or str(values.dtype)
            nat = int(np.count_nonzero(np.isnat(values)))
            self.nulls += nat
            values = datetime64_seconds(values)  # NaT -> NaN, skipped below like NaN but counted as a null
        if self.identifier:
            self.values += int(values.size)
            return
        values = np.asarray(values)
        if values.dtype.kind == "O":
            values = values.astype(np.float64)
        raw = values
        nan = None
        if values.dtype.kind in "fc":
            nan = np.isnan(values)
            count = int(np.count_nonzero(nan))
            if count:
                self.nans += count - nat
                values = values[~nan] if self.kind == "numeric" else values
            else:
                nan = None
        if self.kind == "image":
            self._add_image(values)
            return
        flat = values.reshape(-1)
        self.moments = self.moments.merge(Moments.of(flat))
        low, high = min_max(flat)
        self.min, self.max = merge_min(self.min, low), merge_max(self.max, high)
        if self.quantile_method == "sample":
            if sampler is None:
                sampler = PositionSampler(self._adds, self.quantile_sample)
                self._adds += 1
            self.sample = self.sample or QuantileSample(self.quantile_sample)
            self.sample.add_values(raw.reshape(-1), sampler, None if nan is None else nan.reshape(-1))
        elif self.quantile_method == "kll":
            self.kll = self.kll if self.kll is not None else new_kll(flat.dtype, self.quantile_k)
            update_kll(self.kll, flat)
        if self.distinct_mode == "all" or (self.distinct_mode == "categorical" and flat.dtype.kind in "iub"):
            registers = hll_registers(flat)
            self.registers = registers if self.registers is None else np.maximum(self.registers, registers)

    def _add_image(self, values: np.ndarray) -> None:
        pixels = values.reshape(-1, values.shape[-1])
        if values.dtype.kind == "f" and self.nans:
            pixels = pixels[~np.isnan(pixels).any(axis=1)]
        channels = Moments.of(pixels, axis=0)
        self.channels = self.channels.merge(channels)
        self.moments = self.moments.merge(Moments(len(values), 0.0, 0.0))  # images counted, not pixels
        low, high = min_max(pixels)
        self.min, self.max = merge_min(self.min, low), merge_max(self.max, high)

    # ----------------------------------------------------------------- merge
    def merge(self, other: "ColumnAccumulator", cache: dict | None = None) -> None:
        """Adds ``other`` (a later fragment's summary) into this one; ``cache``: see QuantileSample."""
        self.nulls += other.nulls
        self.nans += other.nans
        self.values += other.values
        self.datetime = self.datetime or other.datetime
        self.moments = self.moments.merge(other.moments)
        self.channels = self.channels.merge(other.channels)
        self.min, self.max = merge_min(self.min, other.min), merge_max(self.max, other.max)
        if other.kll is not None:
            if self.kll is None:
                self.kll = new_kll(np.float32 if kll_kind(other.kll) == "floats" else np.float64, self.quantile_k)
            self.kll.merge(other.kll)
        if other.sample is not None:
            if self.sample is None:
                self.sample = QuantileSample(other.sample.capacity)
            self.sample.merge(other.sample, cache)
        if other.registers is not None:
            self.registers = other.registers if self.registers is None else np.maximum(self.registers, other.registers)
        if other.vocabulary is not None:
            if self.vocabulary is None:
                self.vocabulary = Vocabulary(self.max_vocabulary)
            self.vocabulary.merge(other.vocabulary)

    # ---------------------------------------------------------------- result
    def to_record(self) -> dict:
        """The JSON-able fields of :class:`ColumnStats`."""
        record: dict[str, Any] = {
            "name": self.name,
            "kind": self.kind,
            "dtype": self.dtype,
            "count": 0,
            "nulls": self.nulls,
            "nans": self.nans,
            "min": _py(self.min),
            "max": _py(self.max),
            "mean": None,
            "variance": None,
            "quantile_rank_error": None,
            "distinct": None,
            "datetime": self.datetime,
            "vocabulary": None,
            "vocabulary_exact": None,
            "vocabulary_truncated": None,
            "vocabulary_cap": None,
            "oov_count": None,
            "value_type": None,
            "channel_mean": None,
            "channel_std": None,
            "image_sizes": None,
            "image_modes": None,
            "kll": None,
            "kll_kind": None,
            "quantile_method": None,
            "quantile_points": None,
            "quantile_sample_size": None,
        }
        if self.identifier:  # no vocabulary (None), so none truncated and no warning
            record.update(count=self.values, value_type="bytes" if self.dtype == "bytes" else "str")
            return record
        if self.kind == "categorical":
            vocabulary = self.vocabulary or Vocabulary(self.max_vocabulary)
            distinct = int(round(vocabulary.distinct()))
            cap = vocabulary_cap(
                distinct, vocabulary.total, min(self.vocabulary_cap, self.max_vocabulary), named=self.named
            )
            top = vocabulary.top()[:cap]
            record.update(
                count=vocabulary.total,
                distinct=distinct,
                vocabulary=[[v, c] for v, c in top],
                vocabulary_exact=vocabulary.exact,
                vocabulary_truncated=not vocabulary.exact or len(top) < distinct,
                vocabulary_cap=cap,
                oov_count=max(0, vocabulary.total - sum(c for _, c in top)),
                value_type=vocabulary.kind or "str",
            )
            return record
        record["count"] = self.moments.count
        if self.kind == "image":
            if self.channels.count:
                record.update(
                    channel_mean=[float(v) for v in np.atleast_1d(self.channels.mean)],
                    channel_std=[float(v) for v in np.sqrt(np.atleast_1d(self.channels.variance))],
                )
            return record
        if self.moments.count:
            record.update(mean=float(self.moments.mean), variance=float(self.moments.variance))
        if self.sample is not None and self.moments.count:
            ordered = self.sample.sorted_values()
            if ordered.size:
                record.update(
                    quantile_points=points_to_text(quantile_points(ordered)),
                    quantile_sample_size=int(ordered.size),
                    quantile_method="sample",
                    quantile_rank_error=sample_rank_error(ordered.size, self.moments.count),
                )
        if self.kll is not None and not self.kll.is_empty():
            record.update(
                kll=kll_to_text(self.kll),
                kll_kind=kll_kind(self.kll),
                quantile_method="kll",
                quantile_rank_error=kll_rank_error(self.kll.k),
            )
        if self.registers is not None:
            record["distinct"] = int(round(min(hll_estimate(self.registers), self.moments.count)))
        return record


def _py(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value
