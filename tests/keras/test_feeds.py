"""KerasDataset as Keras's own data adapter: what each backend is handed (``streamfeed.keras.feeds``).

The backends' real ``fit`` with these paths runs in ``test_backends.py``;
here, on this process's backend, the pieces are checked against Keras's own:
the blocks TensorFlow receives, and class weights against Keras's function.
"""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from keras.src.trainers.data_adapters import data_adapter_utils, get_data_adapter

import streamfeed as sf
from streamfeed.errors import ArgumentError
from streamfeed.keras import feeds


def _write(path, rows: int, *, group: int = 100) -> str:
    rng = np.random.default_rng(0)
    table = pa.table(
        {
            "a": rng.standard_normal(rows).astype("float32"),
            "b": rng.standard_normal(rows).astype("float32"),
            "label": (np.arange(rows) % 3).astype("int64"),
            "id": np.arange(rows, dtype="int64"),
        }
    )
    pq.write_table(table, path, row_group_size=group)
    return str(path)


def test_keras_takes_the_dataset_as_its_own_adapter(tmp_path):
    """The extension point _keras_internals relies on: Keras returns our object unchanged."""
    train = sf.read_parquet(_write(tmp_path / "d.parquet", 250)).batch(32).to_keras(label="label")
    assert get_data_adapter(train) is train
    assert train.batch_size == 32 and train.partial_batch_size == 250 % 32 and train.has_partial_batch


def test_blocks_stack_equal_batches_and_keep_a_short_last_batch_alone():
    batches = [(np.full((4, 2), i, "float32"), {"y": np.full(4, i)}) for i in range(5)]
    batches.append((np.full((3, 2), 9, "float32"), {"y": np.full(3, 9)}))
    out = list(feeds.blocks(iter(batches), 2))
    assert [block[0].shape for block in out] == [(2, 4, 2), (2, 4, 2), (1, 4, 2), (1, 3, 2)]
    restored = [(x[i], {"y": y["y"][i]}) for x, y in out for i in range(len(x))]
    for (x, y), (want_x, want_y) in zip(restored, batches):
        np.testing.assert_array_equal(x, want_x)
        np.testing.assert_array_equal(y["y"], want_y["y"])
    assert len(restored) == len(batches)


def test_a_block_is_about_four_mebibytes_of_batches():
    batch = (np.zeros((1024, 32), "float32"), np.zeros(1024, "float32"))
    assert feeds.block_batches(batch) == feeds.BLOCK_BYTES // (1024 * 33 * 4)
    assert feeds.block_batches((np.zeros((64, 224, 224, 3), "uint8"),)) == 1
    assert feeds.block_batches((np.zeros((2, 1), "float32"),)) == feeds.MAX_BLOCK


@pytest.mark.parametrize("shape", ["ints", "column", "one_hot", "floats"])
def test_class_weights_equal_keras_own(shape):
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 4, 500)
    y = {
        "ints": labels,
        "column": labels[:, None],
        "one_hot": np.eye(4, dtype="float32")[labels],
        "floats": labels.astype("float32") + rng.uniform(-0.3, 0.3, 500).astype("float32"),
    }[shape]
    class_weight = {0: 0.5, 2: 3.0, 7: 9.0}  # class 1 and 3 not named: weight 1
    x = np.zeros((500, 2), "float32")
    _, _, ours = feeds.with_class_weight((x, y), class_weight, "float32")
    theirs = data_adapter_utils.class_weight_to_sample_weights(y, class_weight)
    np.testing.assert_array_equal(ours, theirs)
    assert ours.dtype == theirs.dtype


def test_class_weights_with_a_weight_column_or_several_labels_are_refused():
    x, y = np.zeros((2, 1)), np.zeros(2)
    with pytest.raises(ArgumentError, match="class_weight"):
        feeds.with_class_weight((x, y, np.ones(2)), {0: 1.0}, "float32")
    with pytest.raises(ArgumentError, match="one label"):
        feeds.with_class_weight((x, (y, y)), {0: 1.0}, "float32")


@pytest.mark.parametrize("kind", ["tf_dataset", "numpy_iterator"])
def test_the_iterators_serve_the_epoch_in_order_once(tmp_path, kind):
    """TensorFlow's dataset (blocks, unbatched) and the JAX/NumPy iterator give the pipeline's batches.

    PyTorch's loader wraps the same iterator; its real fits run in test_backends.py.
    """
    train = sf.read_parquet(_write(tmp_path / "d.parquet", 250)).shuffle(seed=3).batch(32)
    keras_data = train.to_keras(features=["a", "b"], label="label", ids="id")
    keras_data.on_epoch_begin()
    if kind == "tf_dataset":
        served = [tuple(np.asarray(part) for part in batch) for batch in keras_data.get_tf_dataset()]
    else:
        served = list(keras_data.get_numpy_iterator())
    keras_data.on_epoch_end()
    with train.iter_epoch(0) as stream:
        expected = list(stream)
    assert [len(x) for x, _ in served] == [len(batch["a"]) for batch in expected] == [32] * 7 + [26]
    for (x, y), batch in zip(served, expected):
        np.testing.assert_array_equal(x, np.stack([batch["a"], batch["b"]], axis=1))
        np.testing.assert_array_equal(y, batch["label"])
    assert sorted(keras_data.served_ids().tolist()) == list(range(250))
    assert keras_data.epoch == 1  # the epoch was served in full and ended
    keras_data.close()


def _feed_threads() -> list[str]:
    return [thread.name for thread in threading.enumerate() if thread.name == "streamfeed-tf-feed"]


def test_tensorflow_blocks_are_built_ahead_in_a_thread_that_an_abandoned_epoch_stops(tmp_path):
    """TensorFlow's next block is built in ``streamfeed-tf-feed`` while the current one is trained.

    200 batches of 10 rows make blocks of 64: after TensorFlow took its first
    batch, the feed thread holds the next block and waits to build the third.
    An abandoned epoch stops and joins it before any bookkeeping; the state
    after the batches trained still resumes exactly, and the epoch restarts
    from its first batch.
    """
    train = sf.read_parquet(_write(tmp_path / "d.parquet", 2000, group=500)).batch(10)
    with train.iter_epoch(0) as stream:
        expected = [batch["a"] for batch in stream]
    keras_data = train.to_keras(features=["a", "b"], label="label")
    keras_data.on_epoch_begin()
    iterator = iter(keras_data.get_tf_dataset())
    taken = [np.asarray(next(iterator)[0]) for _ in range(3)]
    assert _feed_threads() == ["streamfeed-tf-feed"]
    state = keras_data.get_state(trained=3)
    keras_data.on_epoch_end()  # Keras abandoned the epoch after 3 batches
    assert _feed_threads() == []
    for x, a in zip(taken, expected):
        np.testing.assert_array_equal(x[:, 0], a)
    with train.iter_epoch(state=state) as stream:
        rest = [batch["a"] for batch in stream]
    assert len(rest) == len(expected) - 3
    np.testing.assert_array_equal(rest[0], expected[3])
    keras_data.on_epoch_begin()
    again = [np.asarray(x)[:, 0] for x, _ in keras_data.get_tf_dataset()]
    keras_data.on_epoch_end()
    assert len(again) == len(expected) and keras_data.epoch == 1
    for x, a in zip(again, expected):
        np.testing.assert_array_equal(x, a)
    del iterator
    keras_data.close()
    assert _feed_threads() == []


def test_a_batch_that_fills_a_block_crosses_as_itself_not_a_stacked_copy():
    """A 64-image batch (9.6 MB) is more than ``BLOCK_BYTES``: its block is one batch, handed over as it is.

    Stacking it would copy 9.6 MB per batch for nothing (a block axis that
    TensorFlow's ``flat_map`` slices off again).
    """
    batches = [({"image": np.full((64, 224, 224, 3), i, "uint8")}, np.full(64, i)) for i in range(3)]
    size = feeds.block_batches(batches[0])
    assert size == 1
    feed = feeds.BlockFeed(iter(batches), size)
    served = list(feed)
    feed.close()
    assert len(served) == len(batches)
    for (x, y), (want_x, want_y) in zip(served, batches):
        assert x["image"] is want_x["image"] and y is want_y  # the same arrays: no copy, no block axis
    assert _feed_threads() == []


def _jpeg_folders(root, per_class: tuple[int, ...]) -> None:
    from PIL import Image

    rng = np.random.default_rng(0)
    for label, count in enumerate(per_class):
        (root / f"class_{label}").mkdir(parents=True)
        for i in range(count):
            pixels = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / f"class_{label}" / f"{i:03d}.jpg", quality=90)


def test_one_batch_blocks_serve_tensorflow_the_epoch_in_order_and_stop_their_feed(tmp_path):
    """Batches above ``BLOCK_BYTES`` (8 images of 224x224x3 float32, 4.8 MB) reach TensorFlow one per element.

    Same batches, same order and the short last batch as the pipeline's own
    epoch; an epoch abandoned after one batch stops the feed thread and
    resumes exactly after it.
    """
    _jpeg_folders(tmp_path / "images", (11, 9))
    train = sf.read_images(tmp_path / "images", size=(224, 224)).shuffle(seed=2).batch(8)
    with train.iter_epoch(0) as stream:
        expected = list(stream)
    keras_data = train.to_keras(features=["image"], label="label", inputs="dict")
    keras_data.on_epoch_begin()
    dataset = keras_data.get_tf_dataset()
    assert feeds.block_batches(keras_data._peek(None)) == 1
    assert dataset.element_spec[0]["image"].shape.as_list() == [None, 224, 224, 3]
    served = [(np.asarray(x["image"]), np.asarray(y)) for x, y in dataset]
    keras_data.on_epoch_end()
    assert [len(x) for x, _ in served] == [len(batch["label"]) for batch in expected] == [8, 8, 4]
    for (x, y), batch in zip(served, expected):
        np.testing.assert_array_equal(x, batch["image"])
        np.testing.assert_array_equal(y, batch["label"])
    assert _feed_threads() == []

    with train.iter_epoch(1) as stream:
        second = list(stream)  # epoch 1: another seeded order
    keras_data.on_epoch_begin()
    iterator = iter(keras_data.get_tf_dataset())
    first = np.asarray(next(iterator)[0]["image"])
    state = keras_data.get_state(trained=1)
    keras_data.on_epoch_end()  # abandoned after one batch
    assert _feed_threads() == []
    np.testing.assert_array_equal(first, second[0]["image"])
    with train.iter_epoch(state=state) as stream:
        rest = list(stream)
    assert [len(batch["label"]) for batch in rest] == [8, 4]
    for batch, want in zip(rest, second[1:]):
        np.testing.assert_array_equal(batch["image"], want["image"])
    del iterator
    keras_data.close()
    assert _feed_threads() == []
