"""The fast counting paths of the statistics give what the plain ones give (issue 28's speed-up).

Strings counted by pyarrow against ``collections.Counter``; integers of a
small range by ``np.bincount`` against ``np.unique``; HyperLogLog registers
of deduplicated integers against every value hashed; the bottom-k position
selection with its probable bound against a full partition; and an Arrow
text column, as an Arrow-backed source could hand the pass, against the
same values as a NumPy object array.
"""

from __future__ import annotations

import collections

import numpy as np
import pyarrow as pa
import pytest

from streamfeed.stats.accumulate import ColumnAccumulator, column_kind, dtype_name, is_identifier
from streamfeed.stats.mixing import splitmix64
from streamfeed.stats.sketches import NO_THRESHOLD, bottom_keys, hll_registers, position_keys, small_range_counts
from streamfeed.stats.vocabulary import count_present, count_values


def _counter(values: np.ndarray) -> tuple[list, list[int]]:
    """The implementation before issue 28's speed-up."""
    found = collections.Counter(values.tolist())
    try:
        items = sorted(found.items())
    except TypeError:
        items = list(found.items())
    return [v for v, _ in items], [c for _, c in items]


def _objects(values: list) -> np.ndarray:
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


OBJECT_COLUMNS = {
    "str": ["b", "a", "b", "ü", "", "日本", "a"] * 5,
    "str_and_none": ["b", None, "a", None, "b"] * 5,
    "numpy_str": [np.str_("x"), "y", np.str_("x")],
    "str_then_bytes": ["a", b"a", "b", b"a"],
    "bytes": [b"\xff", b"a", b"\xff"],
    "str_and_nan": ["a", float("nan"), "a"],
    "str_and_int": ["a", 1, "a"],
    "int_and_bool": [1, True, 2, 1.0],
    "surrogate": ["\udcff", "a", "\udcff"],
    "all_none": [None, None],
    "none_first": [None] * 70 + ["a", "b", "a"],
}


@pytest.mark.parametrize("name", sorted(OBJECT_COLUMNS))
def test_object_columns_count_as_counter_counts(name):
    values = _objects(OBJECT_COLUMNS[name])
    uniques, counts = count_values(values)
    expected = _counter(values)
    assert (uniques, counts) == expected
    # NumPy's str_ comes back as str (equal, same hash and JSON); every other type is kept
    assert [type(v) for v in uniques] == [str if isinstance(v, str) else type(v) for v in expected[0]]
    present, present_counts, nulls = count_present(values)
    kept = values[np.asarray([v is not None for v in values], dtype=bool)]
    assert (present, present_counts) == _counter(kept)
    assert nulls == len(values) - len(kept)


@pytest.mark.parametrize(
    "values",
    [
        np.array([3, 1, 3, -7, 0], dtype=np.int8),
        np.array([-128, 127, -128], dtype=np.int8),
        np.array([2**64 - 1, 2**64 - 3, 2**64 - 1], dtype=np.uint64),
        np.array([-(2**63), 2**63 - 1], dtype=np.int64),
        np.random.default_rng(0).integers(0, 5000, 3000),
        np.random.default_rng(1).integers(-(2**40), 2**40, 3000),
        np.array([[1, 2], [2, 2]], dtype=np.int32),
        np.array([True, False, True]),
        np.array([0.5, 0.5, 1.0]),
    ],
)
def test_numeric_counts_are_np_unique(values):
    uniques, counts = np.unique(values, return_counts=True)
    assert count_values(values) == (uniques.tolist(), counts.tolist())


def test_small_range_counts_only_for_small_integer_ranges():
    assert small_range_counts(np.array([0, 10**6])) is None
    assert small_range_counts(np.array([0.0, 1.0])) is None
    uniques, counts = small_range_counts(np.array([5, -2, 5], dtype=np.int16))
    assert uniques.tolist() == [-2, 5] and counts.tolist() == [1, 2]


@pytest.mark.parametrize(
    "values",
    [
        np.random.default_rng(2).integers(0, 100_000, 200_000),
        np.random.default_rng(3).integers(0, 2, 50_000),
        np.array([2**53, 2**53 + 1, -3], dtype=np.int64),
        np.arange(3000, dtype=np.uint16),
    ],
)
def test_hll_of_deduplicated_integers_is_hll_of_every_value(values):
    """The registers before the change: every value's float64 bits hashed (no deduplication)."""
    x = values.astype(np.float64) + 0.0
    hashed = splitmix64(x.view(np.uint64))
    index = (hashed >> np.uint64(52)).astype(np.intp)
    _, exponent = np.frexp((hashed & np.uint64((1 << 52) - 1)).astype(np.float64))
    expected = np.zeros(4096, dtype=np.uint8)
    np.maximum.at(expected, index, (53 - exponent).astype(np.uint8))
    assert np.array_equal(hll_registers(values), expected)


@pytest.mark.parametrize(
    ("m", "capacity", "threshold"),
    [(275_000, 65_536, NO_THRESHOLD), (275_000, 65_536, 2**60), (1000, 65_536, NO_THRESHOLD), (50_000, 10, 2**62)],
)
def test_bottom_keys_are_the_smallest_keys_under_the_threshold(m, capacity, threshold):
    keys = position_keys(7, m)
    under = np.flatnonzero(keys <= np.uint64(threshold))
    expected = np.sort(under[np.argsort(keys[under], kind="stable")[:capacity]])
    assert np.array_equal(bottom_keys(keys, capacity, threshold), expected)


def test_bottom_keys_fall_back_when_the_bound_holds_too_few():
    keys = np.full(300_000, np.uint64(2**63)) + np.arange(300_000, dtype=np.uint64)  # none near 0
    assert np.array_equal(bottom_keys(keys, 100), np.arange(100))


TEXT = ["paris", None, "oslo", "paris", "lima", None, "paris"] * 40


@pytest.mark.parametrize(
    ("name", "array"),
    [
        ("city", pa.array(TEXT)),
        ("city", pa.array(TEXT, pa.large_string())),
        ("city", pa.array(TEXT).dictionary_encode()),
        ("city", pa.chunked_array([pa.array(TEXT[:100]), pa.array(TEXT[100:])])),
        ("blob", pa.array([None if v is None else v.encode() for v in TEXT])),
        ("path", pa.array(TEXT)),
        ("none", pa.array([None, None], pa.string())),
    ],
)
def test_an_arrow_text_column_has_the_statistics_of_its_python_objects(name, array):
    objects = _objects(array.to_pylist())
    records = []
    for values in (array, objects):
        kind = column_kind(name, values, set())
        accumulator = ColumnAccumulator(
            name, kind, dtype_name(values), max_vocabulary=100, identifier=is_identifier(name, values, set())
        )
        accumulator.add(values[: len(values) // 2])
        accumulator.add(values[len(values) // 2 :])
        records.append(accumulator.to_record())
    assert records[0] == records[1]
    assert records[0]["nulls"] == sum(v is None for v in objects)
