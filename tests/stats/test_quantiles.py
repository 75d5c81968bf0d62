"""KLL quantiles within the sketch's stated rank error; HLL distinct counts within a few standard errors."""

from __future__ import annotations

import numpy as np
import pytest

from streamfeed.stats.accumulate import ColumnAccumulator
from streamfeed.stats.result import ColumnStats
from streamfeed.stats.sketches import HLL_M, PositionSampler, hll_estimate, hll_registers


@pytest.mark.parametrize("method", ["sample", "kll"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_quantile_rank_error_is_within_the_bound_after_merging_fragments(dtype, method):
    rng = np.random.default_rng(3)
    data = (rng.lognormal(0, 2, 200_000) * (1 if dtype != np.int64 else 1000)).astype(dtype)
    options = {"max_vocabulary": 10, "quantile_k": 200, "quantiles": method, "quantile_sample": 20_000}
    total = ColumnAccumulator("x", "numeric", str(np.dtype(dtype)), **options)
    parts = list(enumerate(np.array_split(data, 13)))
    for index, part in parts[::-1]:  # merge order does not matter for the sample
        piece = ColumnAccumulator("x", "numeric", str(np.dtype(dtype)), **options)
        piece.add(part, PositionSampler(index, 20_000))
        total.merge(piece)
    column = ColumnStats.from_dict(total.to_record())
    bound = column.quantile_rank_error
    if method == "kll":
        assert 0.005 < bound < 0.02  # k=200: 1.33 %
    else:  # data 10x the sample: DKW at n=20 000 (1.15 %) + the stored grid (0.05 %)
        assert column.quantile_sample_size == 20_000 and 0.011 < bound < 0.013
    ordered = np.sort(data)
    for q in np.linspace(0, 1, 41):
        value = column.quantile(float(q))
        low = np.searchsorted(ordered, value, side="left") / data.size
        high = np.searchsorted(ordered, value, side="right") / data.size
        # the true rank interval of the returned value must come within the bound of q
        assert low - bound <= q <= high + bound, (q, value, low, high)
    boundaries = column.quantiles(4)
    assert len(boundaries) == 3 and boundaries == sorted(boundaries)


def test_quantiles_of_a_non_numeric_column_say_so():
    column = ColumnStats(name="city", kind="categorical", dtype="str")
    with pytest.raises(ValueError, match="city"):
        column.quantile(0.5)


@pytest.mark.parametrize("n", [0, 1, 50, 3_000, 200_000])
def test_hll_distinct_estimate_within_four_standard_errors(n):
    values = np.random.default_rng(n).permutation(n * 3)[:n].astype(np.float64)
    registers = hll_registers(np.concatenate([values, values[: n // 2]]))  # duplicates do not count
    estimate = hll_estimate(registers)
    assert abs(estimate - n) <= 4 * 1.04 / np.sqrt(HLL_M) * n + 1e-9


def test_hll_registers_merge_by_maximum_equals_one_pass():
    values = np.random.default_rng(0).standard_normal(10_000)
    merged = np.maximum(hll_registers(values[:3000]), hll_registers(values[3000:]))
    assert np.array_equal(merged, hll_registers(values))
    assert np.array_equal(hll_registers(np.array([1.0, -0.0])), hll_registers(np.array([1, 0], dtype=np.int64)))
