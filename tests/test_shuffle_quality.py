"""The shuffle's measured quality on a sorted file, against what it promises.

Seeds are fixed, so these checks are deterministic: they fail only if the
shuffle stops moving rows across the epoch or stops mixing within windows.
"""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf

ROWS, GROUP, BATCH = 64_000, 1_000, 256


@pytest.fixture(scope="module")
def sorted_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("sorted") / "sorted.parquet"
    pq.write_table(pa.table({"id": np.arange(ROWS)}), path, row_group_size=GROUP)
    return path


def _order(path, window, seed=3, epoch=0):
    data = sf.read_parquet(path).shuffle(seed=seed, window=window).batch(BATCH)
    with data.iter_epoch(epoch) as batches:
        return np.concatenate([b["id"] for b in batches])


@pytest.mark.parametrize("window", [1, 8])
def test_rows_travel_across_the_whole_epoch(sorted_file, window):
    order = _order(sorted_file, window)
    assert sorted(order) == list(range(ROWS))
    assert abs(np.corrcoef(np.arange(ROWS), order)[0, 1]) < 0.2
    mean_move = np.mean(np.abs(order - np.arange(ROWS))) / ROWS
    assert 0.25 < mean_move < 0.42  # a uniform shuffle gives 1/3


def test_batches_mix_exactly_the_rows_of_their_window(sorted_file):
    window = 8
    order = _order(sorted_file, window)
    groups_per_batch = [len(np.unique(b // GROUP)) for b in order[: ROWS - ROWS % BATCH].reshape(-1, BATCH)]
    # 256 rows drawn from 8 row groups of 1000: nearly always all 8 are present
    assert np.mean(groups_per_batch) > 7.5
    assert max(groups_per_batch) <= 2 * window  # a batch spans at most two windows
    spread = np.mean(order[: ROWS - ROWS % BATCH].reshape(-1, BATCH).std(axis=1)) / order.std()
    # the window's 8 row groups come from anywhere in the epoch (the fragment order is
    # shuffled), so a batch's ids spread nearly like a global shuffle's (1.0)
    assert spread > 0.8


def test_each_epoch_and_seed_gives_a_different_order(sorted_file):
    base = _order(sorted_file, 4)
    assert not np.array_equal(base, _order(sorted_file, 4, epoch=1))
    assert not np.array_equal(base, _order(sorted_file, 4, seed=4))
    assert np.array_equal(base, _order(sorted_file, 4))
