"""Vocabularies with counts: exact up to a cap, a frequent-items sketch beyond.

Values are counted per chunk (``np.bincount`` for integers of a small
range, ``np.unique(..., return_counts=True)`` for other NumPy values,
pyarrow's ``value_counts`` for strings, given as an Arrow array or as
Python ``str``, a hash count of other Python objects; one Python operation
per *distinct* value past the count, not per row) and merged into a dict.
While a column has at most ``max_vocabulary`` distinct values the counts
are exact. Past the cap the counts move into an Apache
DataSketches ``frequent_strings_sketch`` sized to track the cap's worth of
items (its estimates are within ``total/maxMapSize*0.75`` of the truth),
and the distinct count into an ``hll_sketch``. Sketch keys are strings, so
values are encoded by the column's ``value_type`` and decoded on the way
out: an int vocabulary stays ints, a vocabulary of Python dates stays dates
(ISO 8601 text in the sketch and in JSON).
"""

from __future__ import annotations

import base64
import collections
import datetime as dt
import json
import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..files.arrow import is_text
from .sketches import _datasketches, small_range_counts

HLL_LG_K = 12


_TYPES: tuple[tuple[str, type], ...] = (
    ("bytes", bytes),
    ("str", str),
    ("int", int),
    ("float", float),
    ("datetime", dt.datetime),  # before date: a datetime is a date
    ("date", dt.date),
    ("time", dt.time),
    ("timedelta", dt.timedelta),
)
ENCODED_IN_JSON = ("bytes", "datetime", "date", "time", "timedelta")
"""Value types that JSON cannot hold as they are: written as :func:`encode` text, read back by :func:`decode`."""


def value_type(values: list) -> str:
    """The JSON-able type of a column's values ('str', 'int', 'float', 'bool', 'bytes', or a date/time type)."""
    for value in values:
        if isinstance(value, bool):
            return "bool"
        for name, kind in _TYPES:
            if isinstance(value, kind):
                return name
    return "str"


def encode(value: Any, kind: str) -> str:
    """A value as a sketch key (and as JSON for :data:`ENCODED_IN_JSON` types); dates and times as ISO 8601."""
    if kind == "bytes":
        return base64.b64encode(value).decode("ascii")
    if kind == "float":
        return repr(float(value))
    if kind in ("datetime", "date", "time") and hasattr(value, "isoformat"):
        return value.isoformat()
    if kind == "timedelta" and isinstance(value, dt.timedelta):
        return repr(value.total_seconds())
    return str(value)


def decode(text: Any, kind: str) -> Any:
    """The inverse of :func:`encode`, also applied to values read back from JSON."""
    if kind == "bytes":
        return base64.b64decode(text)
    if kind == "datetime":
        return text if isinstance(text, dt.datetime) else dt.datetime.fromisoformat(text)
    if kind == "date":
        return text if isinstance(text, dt.date) else dt.date.fromisoformat(text)
    if kind == "time":
        return text if isinstance(text, dt.time) else dt.time.fromisoformat(text)
    if kind == "timedelta":
        return text if isinstance(text, dt.timedelta) else dt.timedelta(seconds=float(text))
    if kind == "int":
        return int(text)
    if kind == "float":
        return float(text)
    if kind == "bool":
        return text if isinstance(text, bool) else text == "True"
    return str(text)


def count_values(values: np.ndarray) -> tuple[list, list[int]]:
    """Distinct values (as Python objects) and their counts, in sorted order where the values sort.

    Python objects (strings from CSV and Parquet) are counted by hash and
    only the distinct values sorted: ``np.unique`` sorts every value by
    Python comparison, 0.19 s against 0.02 s for 250 000 strings of 1 000
    values, and it was 56 % of a CSV statistics pass (issue 28). A column
    of ``str`` is counted by pyarrow, and integers of a range no wider than
    the column by ``np.bincount`` (see :func:`count_present`). None is a
    value here, as ``collections.Counter`` counts it.
    """
    if values.size == 0:
        return [], []
    if values.dtype.kind == "O":
        counted = _count_strings(values)
        if counted is not None and counted[2] == 0:
            return counted[0], counted[1]
        return _count_objects(values)
    return _count_numbers(values)


def is_arrow_text(values: Any) -> bool:
    """Whether a column is an Arrow array of text or binary (or a dictionary of them), as Arrow-backed
    sources hand a statistics pass (``files.arrow.TEXT_AS_ARROW``) before converting it to Python objects."""
    return isinstance(values, (pa.Array, pa.ChunkedArray)) and is_text(values.type)


def arrow_text_type(values: Any) -> str:
    """The Python type name of an Arrow text column's values, as ``dtype_name`` gives for objects."""
    if values.null_count == len(values):
        return "object"
    kind = values.type.value_type if pa.types.is_dictionary(values.type) else values.type
    return "str" if pa.types.is_string(kind) or pa.types.is_large_string(kind) else "bytes"


def count_present(values: Any) -> tuple[list, list[int], int]:
    """:func:`count_values` of the values that are not None, and how many were None.

    A column of ``str`` (or None) goes to pyarrow in one conversion, which
    finds the None too, and ``pyarrow.compute.value_counts`` counts it
    without the GIL: 0.08 s per million strings of 1 000 values against
    0.11 s for the None check and ``collections.Counter`` (the pass's
    largest cost after the CSV parse, issue 28). An Arrow text column
    (:func:`is_arrow_text`) is counted as it is: 0.025 s per million.
    """
    if is_arrow_text(values):
        return _arrow_counts(values)
    if values.dtype.kind != "O":
        return (*count_values(values), 0)
    counted = _count_strings(values) if values.size else None
    if counted is not None:
        return counted
    missing = none_mask(values)
    nulls = int(missing.sum())
    return (*count_values(values[~missing] if nulls else values), nulls)


def none_mask(values: np.ndarray) -> np.ndarray:
    """Where an object array holds None, as a bool array."""
    try:  # a C loop: 3.5 ms for 250 000 strings where a Python lambda per value took 36 ms
        return np.asarray(np.equal(values, None), dtype=np.bool_)  # type: ignore[call-overload]
    except (TypeError, ValueError):  # values whose == does not give one bool (arrays in a list column)
        return np.frompyfunc(lambda v: v is None, 1, 1)(values).astype(bool)


def _count_strings(values: np.ndarray) -> tuple[list, list[int], int] | None:
    """Sorted distinct values, their counts and the None count of an object array of ``str`` and None;
    None for any other content (bytes, numbers, a mix), which pyarrow would convert or refuse.

    pyarrow infers ``string`` only when every value is a ``str`` or None (bytes among them give
    ``binary``, NaN or an int an error), so what it counts are the values ``Counter`` would.
    """
    flat = values.reshape(-1)
    first = next((value for value in flat[:64] if value is not None), None)
    if not isinstance(first, str):  # bytes (an image column), numbers: not converted only to be refused
        return None
    try:
        array = pa.array(flat)
    except (pa.ArrowException, TypeError, ValueError):
        return None
    if not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)):
        return None
    return _arrow_counts(array)


def _arrow_counts(array: pa.Array | pa.ChunkedArray) -> tuple[list, list[int], int]:
    """Sorted distinct values, counts and null count of an Arrow text or binary column."""
    if pa.types.is_dictionary(array.type):
        array = array.cast(array.type.value_type)
    counted = pc.value_counts(array)
    pairs = [
        (value, count)
        for value, count in zip(counted.field("values").to_pylist(), counted.field("counts").to_pylist())
        if value is not None
    ]
    pairs.sort()  # distinct str (or bytes): by value
    return [value for value, _ in pairs], [count for _, count in pairs], int(array.null_count)


def _hashable(value: object) -> object:
    try:
        hash(value)
    except TypeError:
        return json.dumps(value, sort_keys=True, default=str)
    return value


def _count_objects(values: np.ndarray) -> tuple[list, list[int]]:
    """Distinct values and counts of an object column; a value that cannot be hashed counted by its JSON text.

    A WebDataset ``.json`` member decodes to a dict (or a list): counted as
    ``json.dumps(value, sort_keys=True)``, so that equal objects count together.
    """
    listed = values.tolist()
    try:
        found = collections.Counter(listed)
    except TypeError:  # dicts and lists (decoded JSON members)
        found = collections.Counter(_hashable(value) for value in listed)
    try:
        items = sorted(found.items())
    except TypeError:  # mixed types do not sort: the order they came in
        items = list(found.items())
    return [value for value, _ in items], [count for _, count in items]


def _count_numbers(values: np.ndarray) -> tuple[list, list[int]]:
    counted = small_range_counts(values)
    if counted is not None:
        uniques, counts = counted
        return uniques.tolist(), counts.tolist()
    uniques, counts = np.unique(values, return_counts=True)
    return uniques.tolist(), counts.tolist()


class Vocabulary:
    """Counts of one column's values; exact until more than ``cap`` distinct."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.kind: str | None = None
        self.counts: dict[Any, int] | None = {}
        self.total = 0
        self._items: Any = None  # frequent_strings_sketch once past the cap
        self._hll: Any = None

    def add(self, uniques: list, counts: list[int]) -> None:
        if not uniques:
            return
        if self.kind is None:
            self.kind = value_type(uniques)
        self.total += int(sum(counts))
        if self.counts is not None:
            merged = self.counts
            for value, count in zip(uniques, counts):
                merged[value] = merged.get(value, 0) + count
            if len(merged) > self.cap:
                self._to_sketch()
            return
        for value, count in zip(uniques, counts):
            key = encode(value, self.kind)
            self._items.update(key, int(count))
            self._hll.update(key)

    def merge(self, other: "Vocabulary") -> None:
        """Adds ``other``'s counts (call in a fixed order: sketch merges are then deterministic)."""
        if other.kind is None:
            return
        if other.counts is not None:
            self.add(list(other.counts), list(other.counts.values()))
            return
        if self.kind is None:
            self.kind = other.kind
        if self.counts is not None:
            self._to_sketch()
        self.total += other.total
        self._items.merge(other._items)
        union = _datasketches().hll_union(HLL_LG_K)
        union.update(self._hll)
        union.update(other._hll)
        self._hll = union.get_result()

    def _to_sketch(self) -> None:
        ds = _datasketches()
        lg_map = max(3, math.ceil(math.log2(self.cap / 0.75)) + 1)
        self._items = ds.frequent_strings_sketch(lg_map)
        self._hll = ds.hll_sketch(HLL_LG_K)
        for value, count in (self.counts or {}).items():
            key = encode(value, self.kind or "str")
            self._items.update(key, int(count))
            self._hll.update(key)
        self.counts = None

    @property
    def exact(self) -> bool:
        return self.counts is not None

    def distinct(self) -> float:
        return float(len(self.counts)) if self.counts is not None else float(self._hll.get_estimate())

    def top(self) -> list[tuple[Any, int]]:
        """Up to ``cap`` (value, count) pairs, by count descending then value ascending."""
        if self.counts is not None:
            pairs = list(self.counts.items())
        else:
            ds = _datasketches()
            found = self._items.get_frequent_items(ds.frequent_items_error_type.NO_FALSE_NEGATIVES)
            pairs = [(decode(item, self.kind or "str"), int(estimate)) for item, estimate, _, _ in found]
        pairs.sort(key=lambda pair: (-pair[1], pair[0]))
        return pairs[: self.cap]
