"""Mergeable moments against NumPy: random arrays with NaN, random fragment splits, any merge order."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streamfeed.stats.accumulate import ColumnAccumulator
from streamfeed.stats.moments import Moments

values = st.lists(
    st.one_of(st.floats(-1e6, 1e6, allow_nan=False, width=64), st.just(float("nan"))), min_size=0, max_size=300
)


def _accumulate(parts: list[np.ndarray]) -> ColumnAccumulator:
    total = ColumnAccumulator("x", "numeric", "float64", max_vocabulary=10, quantile_k=200)
    for part in parts:
        piece = ColumnAccumulator("x", "numeric", "float64", max_vocabulary=10, quantile_k=200)
        piece.add(part)
        total.merge(piece)
    return total


def _split(data: np.ndarray, cuts: list[int]) -> list[np.ndarray]:
    points = sorted({min(c, len(data)) for c in cuts})
    return np.split(data, points)


@settings(max_examples=150, deadline=None)
@given(values, st.lists(st.integers(0, 300), max_size=8), st.randoms(use_true_random=False))
def test_counts_moments_and_extremes_match_numpy_whatever_the_split_and_order(raw, cuts, random):
    data = np.array(raw, dtype=np.float64)
    parts = _split(data, cuts)
    shuffled = parts[:]
    random.shuffle(shuffled)
    finite = data[~np.isnan(data)]
    for order in (parts, shuffled):
        record = _accumulate(order).to_record()
        assert record["count"] == finite.size
        assert record["nans"] == int(np.isnan(data).sum())
        if finite.size == 0:
            assert record["mean"] is None and record["min"] is None
            continue
        assert record["min"] == finite.min() and record["max"] == finite.max()
        scale = max(1.0, float(np.abs(finite).max()))
        assert abs(record["mean"] - finite.mean()) <= 1e-9 * scale
        assert abs(record["variance"] - finite.var()) <= 1e-9 * scale * scale


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 2000), st.floats(-1e9, 1e9), st.integers(0, 2**31))
def test_chan_merge_is_stable_for_a_large_offset(n, offset, seed):
    # sum(x**2) - n*mean**2 loses every digit here; the pairwise formula must not
    x = offset + np.random.default_rng(seed).standard_normal(n)
    merged = Moments()
    for part in np.array_split(x, 7):
        merged = merged.merge(Moments.of(part))
    assert merged.count == n
    assert abs(merged.variance - x.var()) <= 1e-6 * max(1.0, x.var()) + 1e-12 * offset**2 / max(n, 1)


def test_object_columns_count_none_as_null_and_lists_are_summarised_over_all_values():
    accumulator = ColumnAccumulator("x", "numeric", "float64", max_vocabulary=10, quantile_k=200)
    accumulator.add(np.array([1.0, None, 3.0], dtype=object))
    record = accumulator.to_record()
    assert (record["nulls"], record["count"], record["mean"]) == (1, 2, 2.0)
    matrix = np.arange(12, dtype=np.float32).reshape(4, 3)  # fixed-size lists: 4 rows of 3
    lists = ColumnAccumulator("v", "numeric", "float32", max_vocabulary=10, quantile_k=200)
    lists.add(matrix)
    record = lists.to_record()
    assert (record["count"], record["min"], record["max"]) == (12, 0.0, 11.0)
    assert record["variance"] == np.var(matrix.astype(np.float64))
