"""Class weights and the balanced sampler.

The data has a rare class (0.5 %) spread evenly: every 1000-row row group
holds exactly 5 rows of class 2, 300 of class 1 and 695 of class 0, so a
read unit's class mix equals the data's and the realised proportions are a
plain binomial draw around the targets.
"""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf
from _stats_reference import stats_of
from streamfeed.errors import StateError
from streamfeed.sampling import class_weights, largest_remainder, with_class_weights

GROUP = 1000
MIX = {0: 695, 1: 300, 2: 5}
WINDOW = 4


def write(path, groups: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    labels = np.concatenate([rng.permutation(np.repeat(list(MIX), list(MIX.values()))) for _ in range(groups)])
    ids = np.arange(len(labels))
    pq.write_table(pa.table({"id": ids, "x": ids * 0.5, "y": labels.astype("int64")}), path, row_group_size=GROUP)
    return path


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = write(tmp_path_factory.mktemp("sampling") / "data.parquet", groups=20)
    dataset = sf.read_parquet(path)
    return dataset, stats_of(dataset, categorical=["y"], label="y")


def labels_by_id(dataset) -> np.ndarray:
    with dataset.iter_epoch(0) as stream:
        chunks = list(stream)
    order = np.argsort(np.concatenate([c["id"] for c in chunks]))
    return np.concatenate([c["y"] for c in chunks])[order]


def epoch(dataset, number: int = 0, state=None) -> list[dict]:
    with dataset.iter_epoch(number, state=state) as stream:
        return list(stream)


def ids_of(batches) -> np.ndarray:
    return np.concatenate([b["id"] for b in batches]) if batches else np.empty(0, dtype=np.int64)


# ------------------------------------------------------------- class weights
def test_class_weights_are_the_balanced_formula(data):
    dataset, stats = data
    weights = class_weights(stats)
    n, k = 20 * GROUP, 3
    assert weights == pytest.approx({c: n / (k * 20 * count) for c, count in MIX.items()})
    labels = labels_by_id(dataset)  # sklearn's compute_class_weight("balanced"), in NumPy
    reference = len(labels) / (3 * np.bincount(labels))
    assert [weights[c] for c in (0, 1, 2)] == pytest.approx(reference.tolist())
    assert class_weights(stats, label="y") == weights  # from the column's vocabulary


def test_with_class_weights_adds_a_weight_per_row(data):
    dataset, stats = data
    weights = class_weights(stats)
    rows = epoch(dataset.map(with_class_weights(stats, "y")).batch(4096))
    labels = np.concatenate([b["y"] for b in rows])
    got = np.concatenate([b["weight"] for b in rows])
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, [weights[c] for c in labels], rtol=1e-6)
    # The added column reaches Keras as sample weights (TensorFlow backend, in process).
    keras_data = (
        dataset.map(with_class_weights(stats, "y"))
        .batch(4096)
        .to_keras(features=["x"], label="y", sample_weight="weight")
    )
    with keras_data:
        x, y, w = keras_data[0]
    np.testing.assert_allclose(w, [weights[c] for c in y], rtol=1e-6)


def test_unknown_label_is_reported(tmp_path, data):
    _, stats = data
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"y": np.array([0, 1, 9], dtype="int64")}), other)
    with pytest.raises(sf.DataError, match="never saw"):
        epoch(sf.read_parquet(other).map(with_class_weights(stats, "y")))


# --------------------------------------------------------------- the sampler
def test_largest_remainder_sums_exactly():
    assert largest_remainder(10, [1, 1, 1]) == [4, 3, 3]
    rng = np.random.default_rng(1)
    for _ in range(50):
        sizes = rng.integers(0, 1000, rng.integers(1, 30))
        total = int(rng.integers(0, 10_000))
        shares = largest_remainder(total, sizes)
        assert sum(shares) == (total if sizes.sum() else 0)
        assert all(abs(s - total * z / max(1, sizes.sum())) < 1 for s, z in zip(shares, sizes))


def test_uniform_targets_lift_a_rare_class_within_binomial_tolerance(data):
    dataset, stats = data
    samples = 6000
    balanced = dataset.shuffle(1, window=WINDOW).balance("y", stats=stats, samples_per_epoch=samples).batch(256)
    for number in range(3):
        labels = np.concatenate([b["y"] for b in epoch(balanced, number)])
        assert len(labels) == samples
        for value in (0, 1, 2):
            share = np.mean(labels == value)
            tolerance = 5 * math.sqrt((1 / 3) * (2 / 3) / samples)
            assert abs(share - 1 / 3) < tolerance, (number, value, share)
        report = balanced.sampling_report()
        assert report["epoch"] == number and report["samples"] == samples
        assert report["counts"] == {int(v): int(np.sum(labels == v)) for v in (0, 1, 2)}
        assert report["realised"][2] == pytest.approx(np.mean(labels == 2))
        assert report["target"] == pytest.approx({0: 1 / 3, 1: 1 / 3, 2: 1 / 3})
        assert report["source"][2] == pytest.approx(0.005)
    # The rare class is oversampled (each of its 100 rows ~20 times), the common one undersampled.
    ids = ids_of(epoch(balanced, 0))
    assert len(np.unique(ids[labels_by_id(dataset)[ids] == 0])) < 2000


def test_custom_proportions(data):
    dataset, stats = data
    samples = 8000
    targets = {0: 0.5, 1: 0.2, 2: 0.3}
    balanced = dataset.balance(
        "y", stats=stats, proportions={0: 5, 1: 2, 2: 3}, samples_per_epoch=samples, seed=4
    ).batch(500)
    labels = np.concatenate([b["y"] for b in epoch(balanced)])
    for value, target in targets.items():
        assert abs(np.mean(labels == value) - target) < 5 * math.sqrt(target * (1 - target) / samples)
    # A class left out is never drawn.
    only = dataset.balance("y", stats=stats, proportions={1: 1, 2: 1}, seed=4).batch(500)
    assert set(np.concatenate([b["y"] for b in epoch(only)]).tolist()) == {1, 2}
    with pytest.raises(ValueError, match="absent"):
        dataset.balance("y", stats=stats, proportions={7: 1.0}, seed=1)


@pytest.mark.parametrize("samples", [None, 5003, 777])
def test_epoch_length_is_exact(data, samples):
    dataset, stats = data
    balanced = dataset.balance("y", stats=stats, samples_per_epoch=samples, seed=2).batch(100)
    expected = samples or 20 * GROUP
    assert balanced.num_rows() == expected
    assert len(balanced) == math.ceil(expected / 100)
    batches = epoch(balanced, 1)
    assert len(batches) == len(balanced)
    assert sum(len(b["id"]) for b in batches) == expected
    assert balanced.batch_size == 100 and all(len(b["id"]) == 100 for b in batches[:-1])


def test_reproducible_per_seed(data):
    dataset, stats = data

    def run(seed: int, number: int = 0) -> np.ndarray:
        return ids_of(epoch(dataset.balance("y", stats=stats, samples_per_epoch=3000, seed=seed).batch(128), number))

    first = run(5)
    assert np.array_equal(first, run(5))
    assert not np.array_equal(first, run(6))
    assert not np.array_equal(first, run(5, number=1))


def test_resume_from_saved_positions_equals_uninterrupted_run(data):
    dataset, stats = data
    balanced = dataset.shuffle(9, window=WINDOW).balance("y", stats=stats, samples_per_epoch=4321).batch(128)
    full = epoch(balanced, 2)
    for stop_after in (1, 9, 17, len(full) - 1):
        with balanced.iter_epoch(2) as stream:
            for _ in range(stop_after):
                next(stream)
            state = stream.get_state()
        rest = epoch(balanced, state=state)
        assert state["epoch"] == 2
        assert np.array_equal(ids_of(rest), ids_of(full)[stop_after * 128 :]), stop_after
    # The state names the sampler settings: other targets or seeds refuse it.
    for other in (
        dataset.shuffle(9, window=WINDOW)
        .balance("y", stats=stats, proportions={0: 2, 1: 1, 2: 1}, samples_per_epoch=4321)
        .batch(128),
        dataset.shuffle(9, window=WINDOW).balance("y", stats=stats, samples_per_epoch=4000).batch(128),
        dataset.shuffle(9, window=WINDOW).balance("y", stats=stats, samples_per_epoch=4321, seed=10).batch(128),
        dataset.shuffle(9, window=WINDOW).batch(128),
    ):
        with pytest.raises(StateError):
            other.iter_epoch(state=state)


def test_balance_reaches_keras_with_the_packed_label(data):
    dataset, stats = data
    train = (
        dataset.balance("y", stats=stats, samples_per_epoch=2048, seed=3).batch(256).to_keras(features=["x"], label="y")
    )
    with train:
        labels = np.concatenate([np.asarray(train[i][1]) for i in range(len(train))])
    assert len(train) == 8 and len(labels) == 2048
    assert abs(np.mean(labels == 2) - 1 / 3) < 5 * math.sqrt(2 / 9 / 2048)
    assert train.dataset.sampling_report()["samples"] == 2048


def peak_bytes(dataset) -> int:
    tracemalloc.start()
    try:
        with dataset.iter_epoch(0) as stream:
            for _ in stream:
                pass
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_rows(tmp_path):
    """Eight times the rows, same fragments and window: the same peak (no per-row index list)."""
    peaks = []
    for groups in (8, 64):
        dataset = sf.read_parquet(write(tmp_path / f"d{groups}.parquet", groups=groups)).with_options(read_threads=1)
        stats = stats_of(dataset, categorical=["y"], label="y")
        balanced = dataset.shuffle(0, window=WINDOW).balance("y", stats=stats).batch(1000).prefetch(1)
        assert balanced.num_rows() == groups * GROUP
        peaks.append(peak_bytes(balanced))
    print("peak traced bytes, 8k vs 64k rows:", peaks)
    assert peaks[1] < 1.5 * peaks[0], peaks
