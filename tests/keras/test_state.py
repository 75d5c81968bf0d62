"""``KerasDataset.get_state`` / ``set_state``: exact states, without Keras training (fast, in-process).

A ``KerasDataset`` is driven by hand the way Keras drives it (``on_epoch_begin``,
``__getitem__``, ``on_epoch_end``); the backend tests check the same under
real ``fit`` with hard crashes.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf
from streamfeed.errors import ArgumentError, StateError

ROWS, BATCH = 600, 50  # 12 batches per epoch


@pytest.fixture
def path(tmp_path):
    target = tmp_path / "d.parquet"
    ids = np.arange(ROWS, dtype=np.int64)
    pq.write_table(
        pa.table({"id": ids, "a": ids.astype(np.float32), "y": ids.astype(np.float32)}), target, row_group_size=100
    )
    return target


def keras_dataset(path, seed: int = 1):
    return sf.read_parquet(path).shuffle(seed=seed, window=2).batch(BATCH).to_keras(features=["a"], label="y", ids="id")


def serve(train, count: int) -> list[int]:
    """Ids of the next ``count`` batches, as Keras would ask for them."""
    before = len(train.served_ids())
    for index in range(count):
        train[index]
    return train.served_ids()[before:].astype(int).tolist()


def test_states_after_served_and_trained_batches_resume_exactly(path):
    with keras_dataset(path) as train:
        train.on_epoch_begin()
        ids = serve(train, 7)  # Keras read 7 batches ahead ...
        after_seven, after_three = train.get_state(), train.get_state(trained=3)  # ... and trained 3
        rest = serve(train, train.num_batches - 7)
        train.on_epoch_end()
        assert train.epoch == 1 and train.get_state() == train.dataset.initial_state(1)
    for state, done in ((after_three, 3), (after_seven, 7)):
        with keras_dataset(path) as resumed:
            resumed.set_state(state)
            assert resumed.epoch == 0 and resumed.num_batches == 12 - done
            resumed.on_epoch_begin()
            assert serve(resumed, resumed.num_batches) == (ids + rest)[done * BATCH :]
            resumed.on_epoch_end()
            assert resumed.epoch == 1


def test_trained_beyond_the_epoch_is_the_next_epoch_start(path):
    """With steps_per_execution Keras numbers a short last execution as if it were full."""
    with keras_dataset(path) as train:
        train.on_epoch_begin()
        serve(train, 12)
        assert train.get_state(trained=16) == train.get_state() == train.dataset.initial_state(1)


def test_an_abandoned_epoch_restarts_and_its_state_is_the_epoch_start(path):
    with keras_dataset(path) as train:
        train.on_epoch_begin()
        first = serve(train, 2)
        train.on_epoch_end()  # ended early: Keras abandoned the epoch
        assert train.epoch == 0 and train.get_state() == train.dataset.initial_state(0)
        train.on_epoch_begin()
        assert serve(train, 2) == first


def test_trained_more_than_served_is_refused(path):
    with keras_dataset(path) as train:
        train.on_epoch_begin()
        serve(train, 2)
        with pytest.raises(ArgumentError, match="No state was kept after batch 3"):
            train.get_state(trained=3)


def test_a_state_of_another_pipeline_is_refused_when_set(path):
    with keras_dataset(path, seed=1) as train:
        train.on_epoch_begin()
        serve(train, 2)
        state = train.get_state()
    with keras_dataset(path, seed=2) as other, pytest.raises(StateError, match="seed"):
        other.set_state(state)
