"""Statistics of list columns: the rows' lengths (exact histogram, percentiles, padding, bucket boundaries)
and the elements described as a column, in the one pass, the same for any thread count.

The truth is computed here from what pyarrow writes and reads back: Python
``collections.Counter`` of the lengths and of the elements, NumPy moments of
the float elements, and a brute-force search over every choice of bucket
boundaries for the padding they leave.
"""

from __future__ import annotations

import collections
import itertools
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf
from streamfeed.stats import Stats
from streamfeed.stats.lengths import (
    LENGTH_BINS,
    bucket_rows,
    coarsen,
    length_quantile,
    padding_waste,
    propose_boundaries,
)

ROWS, FILES, ROW_GROUP = 1200, 3, 110


def long_tail_lists(rng: np.random.Generator, rows: int) -> list[list[int]]:
    """Lengths 0 (about a tenth), a few, and a long tail (Pareto), of token ids in [1, 500)."""
    lengths = np.where(rng.random(rows) < 0.1, 0, np.minimum(1 + (rng.pareto(1.2, rows) * 4).astype(int), 200))
    return [rng.integers(1, 500, size=int(n)).tolist() for n in lengths]


@pytest.fixture(scope="module")
def list_data(tmp_path_factory) -> tuple[Path, dict[str, list]]:
    """Three Parquet files with ``tok`` (list<int32>), ``w`` (large_list<float64>) and ``y``; the rows as read back."""
    folder = tmp_path_factory.mktemp("list-stats")
    rng = np.random.default_rng(5)
    truth: dict[str, list] = {"tok": [], "w": [], "y": []}
    for index in range(FILES):
        tokens = long_tail_lists(rng, ROWS // FILES)
        weights = [(rng.normal(size=len(row) // 2 + 1) * 3 + 1).tolist() for row in tokens]
        table = pa.table(
            {
                "tok": pa.array(tokens, type=pa.list_(pa.int32())),
                "w": pa.array(weights, type=pa.large_list(pa.float64())),
                "y": pa.array(rng.integers(0, 2, len(tokens)), type=pa.int64()),
            }
        )
        path = folder / f"part-{index}.parquet"
        pq.write_table(table, path, row_group_size=ROW_GROUP)
        back = pq.read_table(path).to_pydict()
        for name in truth:
            truth[name] += back[name]
    return folder, truth


def _smallest_at_share(lengths: list[int], q: float) -> int:
    ordered = sorted(lengths)
    return ordered[max(0, int(np.ceil(q * len(ordered))) - 1)]


def test_lengths_and_elements_are_described_exactly(list_data):
    folder, truth = list_data
    stats = sf.compute_stats(sf.read_parquet(folder))
    tok = stats["tok"]
    lengths = [len(row) for row in truth["tok"]]
    assert tok.kind == "sequence" and tok.dtype == "list<int32>"
    assert tok.count == len(lengths) == stats.rows
    assert {int(k): int(v) for k, v in tok.lengths["histogram"]} == dict(collections.Counter(lengths))
    assert tok.lengths["bin_width"] == 1
    assert tok.lengths["min"] == min(lengths) and tok.lengths["max"] == max(lengths)
    assert tok.lengths["values"] == sum(lengths)
    assert tok.lengths["mean"] == pytest.approx(np.mean(lengths))
    for q in (0.0, 0.1, 0.5, 0.9, 0.99, 1.0):
        assert tok.length_quantile(q) == _smallest_at_share(lengths, q), q
    assert tok.lengths["quantiles"]["0.95"] == _smallest_at_share(lengths, 0.95)
    # the elements: integer ids, counted as a vocabulary (exactly: 499 values), their range on the column
    elements = collections.Counter(value for row in truth["tok"] for value in row)
    element = tok.element_stats
    assert element.kind == "categorical"
    assert dict(element.vocabulary) == dict(elements) and element.vocabulary_exact
    assert tok.min == min(elements) and tok.max == max(elements)
    # float elements: moments and quantiles as a numeric column of every value
    flat = np.array([value for row in truth["w"] for value in row])
    w = stats["w"].element_stats
    assert stats["w"].dtype == "list<float64>" and w.kind == "numeric"
    assert w.count == flat.size
    assert w.mean == pytest.approx(flat.mean()) and w.variance == pytest.approx(flat.var())
    assert w.quantile(0.5) == pytest.approx(np.quantile(flat, 0.5), abs=0.05)
    assert stats["w"].min == flat.min() and stats["w"].max == flat.max()
    assert stats["y"].kind == "numeric"  # the other columns as before


def test_list_statistics_are_the_same_for_any_thread_count_and_survive_json(list_data, tmp_path):
    folder, _ = list_data
    one = sf.compute_stats(sf.read_parquet(folder), threads=1)
    three = sf.compute_stats(sf.read_parquet(folder), threads=3)
    assert one.to_json() == three.to_json()
    one.save(tmp_path / "s.json")
    back = Stats.load(tmp_path / "s.json")
    assert back.to_json() == one.to_json()
    tok = back["tok"]
    assert tok.bucket_boundaries(4) == one["tok"].bucket_boundaries(4)
    assert tok.element_stats.vocabulary == one["tok"].element_stats.vocabulary
    assert json.loads(back.to_json())["columns"]["tok"]["lengths"]["histogram"][0][0] == 0  # empty rows counted


def _brute_force_waste(histogram: dict[int, int], buckets: int) -> float:
    lengths = sorted(histogram)
    best = padding_waste(histogram)
    for count in range(1, buckets):
        for cut in itertools.combinations(lengths[:-1], count):
            best = min(best, padding_waste(histogram, cut))
    return best


@pytest.mark.parametrize("seed", range(6))
def test_proposed_boundaries_leave_the_least_padding_of_any_choice(seed):
    rng = np.random.default_rng(seed)
    lengths = rng.choice(np.arange(1, 200), size=int(rng.integers(3, 12)), replace=False)
    histogram = {int(length): int(rng.integers(1, 50)) for length in lengths}
    for buckets in (1, 2, 3, 4):
        boundaries = propose_boundaries(histogram, buckets)
        assert len(boundaries) <= buckets - 1
        assert padding_waste(histogram, boundaries) == pytest.approx(_brute_force_waste(histogram, buckets))


def test_padding_waste_and_bucket_rows_are_counted_from_the_rows():
    histogram = {2: 10, 5: 4, 9: 1}  # 10 rows of 2, 4 of 5, 1 of 9: 49 values
    assert padding_waste(histogram) == pytest.approx(1 - 49 / (15 * 9))
    assert padding_waste(histogram, [2, 5]) == pytest.approx(0.0)
    assert padding_waste(histogram, [4]) == pytest.approx(1 - 49 / (10 * 4 + 5 * 9))
    assert bucket_rows(histogram, [2, 5]) == [10, 4, 1]
    assert bucket_rows(histogram, [1, 3, 100]) == [0, 10, 5, 0]
    with pytest.raises(sf.ArgumentError, match="strictly increasing"):
        padding_waste(histogram, [5, 5])
    assert length_quantile(histogram, 0.5) == 2 and length_quantile(histogram, 0.7) == 5


def test_many_distinct_lengths_are_binned_upward_so_quantiles_never_fall_below_the_truth():
    rng = np.random.default_rng(1)
    lengths = rng.integers(0, 60_000, size=80_000)
    histogram, width = coarsen(dict(collections.Counter(lengths.tolist())), 1)
    assert len(histogram) <= LENGTH_BINS and width > 1
    assert sum(histogram.values()) == lengths.size
    for q in (0.01, 0.5, 0.9, 0.999):
        truth = _smallest_at_share(lengths.tolist(), q)
        assert truth <= length_quantile(histogram, q) < truth + width


def test_the_stats_command_prints_a_list_columns_lengths_and_buckets(list_data, tmp_path, capsys):
    from streamfeed.cli import main

    folder, truth = list_data
    assert main(["stats", str(folder), "-o", str(tmp_path / "s.json")]) == 0
    out = capsys.readouterr().out
    lengths = [len(row) for row in truth["tok"]]
    line = next(line for line in out.splitlines() if line.startswith("list 'tok'"))
    assert f"lengths {min(lengths)}..{max(lengths)}" in line
    assert f"p50 {_smallest_at_share(lengths, 0.5)}" in line
    assert "499 distinct elements" in line and "in buckets <= [" in line


def test_proposed_boundaries_feed_a_bucket_whose_padding_is_what_the_statistics_predicted(list_data):
    """Boundaries from ``stats`` go into ``sf.Bucket`` as they are (the last is the longest row, so no row is
    too long), and the pad slots of the epoch's batches are exactly the share ``padding_waste`` gives."""
    folder, truth = list_data
    dataset = sf.read_parquet(folder, columns=["tok", "y"])
    tok = sf.compute_stats(dataset)["tok"]
    boundaries = tok.bucket_boundaries(3)
    assert len(boundaries) == 3 and boundaries[-1] == max(len(row) for row in truth["tok"])
    bucket = sf.Bucket("tok", boundaries=tuple(boundaries), batch_sizes=(64, 32, 16))
    slots = values = rows = 0
    for batch in dataset.shuffle(seed=2).batch(bucket=bucket).iter_epoch():
        slots += batch["tok"].size
        values += int(batch["tok_length"].sum())
        rows += len(batch["y"])
    assert rows == len(truth["tok"]) and values == sum(len(row) for row in truth["tok"])
    assert 1 - values / slots == pytest.approx(tok.padding_waste(boundaries))
    assert tok.padding_waste(boundaries) < 0.7 * tok.padding_waste()  # three shapes instead of one: less padding
