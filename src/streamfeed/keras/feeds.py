"""How served batches reach each backend once :class:`KerasDataset` is Keras's data adapter.

TensorFlow gets a ``tf.data.Dataset`` that crosses from Python in *blocks*:
``block`` batches stacked along a new first axis, one
``tf.data.Dataset.from_generator`` element each, split back into batches
inside TensorFlow by ``flat_map`` over ``from_tensor_slices`` (half the CPU
of ``unbatch()``: 0.22 against 0.43 s per million rows of 32 float32 in a
graph that drains the dataset, 5 alternations, load ~2). Keras's own
adapter for a ``PyDataset`` crosses once per batch; measured on this
2-core machine (Dense(16)→Dense(1), batch 1024 × 32 float32, Adam, load ~2),
in-memory NumPy ``fit`` ran 0.34 / 1.19 M rows/s at ``steps_per_execution``
1 / 32, a ``PyDataset`` over the same memory 0.24 / 1.01, and 32-batch
blocks 0.40 / 1.58 (``docs/performance.md``). A batch of ``BLOCK_BYTES`` or
more (64 images of 224x224x3 uint8: 9.6 MB) is a block of one: it crosses as
it is, with no block axis to stack (a 9.6 MB copy) and ``flat_map`` away
(with the model's step cut to nothing, 1.73 against 1.91 CPU ms per image of
the streamfeed image benchmark, 878 against 743 images/s, 4 alternations).
The dataset has no ``prefetch``: TensorFlow pulls a block only when a train
step asks for its first batch, so each epoch's generator starts after
Keras's ``on_epoch_begin`` — the order the adapter's epoch bookkeeping relies
on (Keras creates the next epoch's iterator before ending the current one,
so a ``prefetch`` would start it early). Once started, the generator builds
the epoch's blocks one ahead in a thread of its own (:class:`BlockFeed`), so
serving and stacking the batches overlaps the model's steps instead of
stalling one step in every block.

JAX and NumPy get the served tuples as they are; PyTorch a ``DataLoader``
(``batch_size=None``: no re-batching) over them, converted with
``keras.ops.convert_to_tensor`` as Keras's own adapter does.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterator, Mapping

import numpy as np

from ..errors import ArgumentError, describe
from ..runtime.background import BackgroundIterator

Batch = tuple  # (x,), (x, y) or (x, y, sample_weight); x and y may be dicts or tuples of arrays
BLOCK_BYTES = 4 << 20
"""Bytes per block crossing into TensorFlow: 32 batches of 1024 × 32 float32 (measured above)."""
MAX_BLOCK = 64


def block_batches(batch: Batch) -> int:
    """How many batches like ``batch`` make one block (at least 1, at most ``MAX_BLOCK``)."""
    size = sum(array.nbytes for array in _leaves(batch))
    return max(1, min(MAX_BLOCK, BLOCK_BYTES // max(1, size)))


def _leaves(value: Any) -> list[np.ndarray]:
    if isinstance(value, Mapping):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _leaves(item)]
    return [] if value is None else [np.asarray(value)]


def _map(fn: Callable[..., Any], *values: Any) -> Any:
    """Applies ``fn`` leaf by leaf to values of the same structure (dicts, tuples, arrays)."""
    first = values[0]
    if isinstance(first, Mapping):
        return {key: _map(fn, *(value[key] for value in values)) for key in first}
    if isinstance(first, (tuple, list)):
        return tuple(_map(fn, *items) for items in zip(*values))
    return fn(*values)


def _stack(batches: list[Batch]) -> Batch:
    return _map(lambda *arrays: np.stack(arrays), *batches)


def _shapes(batch: Batch) -> list[tuple[int, ...]]:
    return [np.shape(leaf) for leaf in _leaves(batch)]


def blocks(batches: Iterator[Batch], size: int) -> Iterator[Batch]:
    """Stacks runs of ``size`` batches; a batch of another shape (the last, another bucket's) starts a new block."""
    pending: list[Batch] = []
    for batch in batches:
        if pending and _shapes(batch) != _shapes(pending[0]):
            yield _stack(pending)
            pending = []
        pending.append(batch)
        if len(pending) == size:
            yield _stack(pending)
            pending = []
    if pending:
        yield _stack(pending)


FEED_DEPTH = 1
"""Blocks built ahead of the one TensorFlow is splitting (one more block of memory, ~4 MiB)."""


class BlockFeed:
    """One epoch's blocks built in a background thread (``streamfeed-tf-feed``), ``FEED_DEPTH`` ahead.

    With ``size`` 1 it serves the batches themselves, unstacked (what
    :func:`tf_dataset` hands TensorFlow when one batch fills a block).

    The adapter stops it (:meth:`close`) before it touches its own epoch
    bookkeeping, so that batches are only ever served on one thread at a time.
    ``wait_seconds`` is how long TensorFlow waited for blocks: the model's
    input stall (the pipeline's own wait now happens on the feed's thread,
    mostly while the model trains).
    """

    def __init__(self, batches: Iterator[Batch], size: int) -> None:
        def produce(stop: threading.Event) -> Iterator[Batch]:
            # A one-batch block is the batch itself: no stack copy, no block axis (see tf_dataset).
            return _until(stop, batches) if size == 1 else blocks(_until(stop, batches), size)

        self._blocks = BackgroundIterator(produce, depth=FEED_DEPTH, name="streamfeed-tf-feed")

    def __iter__(self) -> Iterator[Batch]:
        return self._blocks

    @property
    def wait_seconds(self) -> float:
        return self._blocks.wait_seconds

    def close(self) -> None:
        """Stops the thread and waits for it (it ends within one batch); safe to call more than once."""
        self._blocks.close()


def _until(stop: threading.Event, items: Iterator[Batch]) -> Iterator[Batch]:
    for item in items:
        if stop.is_set():
            return
        yield item


def tf_dataset(
    first: Batch,
    batches: Callable[[], Iterator[Batch]],
    track: Callable[[Callable[[], BlockFeed]], BlockFeed],
    *,
    varying: bool = False,
) -> Any:
    """A ``tf.data.Dataset`` of the batches ``batches()`` serves, crossing in blocks (or one by one when a
    batch fills a block).

    ``first`` (a batch of the data, not consumed) gives the structure and
    dtypes; every batch dimension is left unknown, so a short last batch fits,
    and with ``varying`` (batches bucketed by length) every other one too.
    Each iteration starts a :class:`BlockFeed` through ``track(start)``, so
    that the caller can stop the previous feed before the new one serves a
    batch, and keep the new one to stop it.
    """
    import tensorflow as tf

    size = block_batches(first)
    # One batch per block (batches of BLOCK_BYTES or more, e.g. 64 images of 224x224x3, 9.6 MB): the
    # batches cross as they are, without np.stack's copy, the block axis and flat_map's slicing.
    blocked = size > 1

    def spec(array: np.ndarray) -> Any:
        array = np.asarray(array)
        dtype = tf.string if array.dtype.kind in "OSU" else tf.as_dtype(array.dtype)
        inner = (None,) * (array.ndim - 1) if varying else array.shape[1:]
        return tf.TensorSpec((None, None, *inner) if blocked else (None, *inner), dtype)

    def start() -> BlockFeed:
        return BlockFeed(batches(), size)

    def generate() -> Iterator[Batch]:
        feed = track(start)
        try:
            yield from feed
        finally:
            feed.close()

    dataset = tf.data.Dataset.from_generator(generate, output_signature=_map(spec, first))
    options = tf.data.Options()
    options.experimental_optimization.inject_prefetch = False  # see the module docstring: pulled, never ahead
    return (dataset.flat_map(_slices) if blocked else dataset).with_options(options)


def _slices(*block: Any) -> Any:
    """A block's batches (``unbatch()`` gives the same elements at twice the CPU; see the module docstring)."""
    import tensorflow as tf

    return tf.data.Dataset.from_tensor_slices(block)


def torch_loader(batches: Callable[[], Iterator[Batch]]) -> Any:
    """A ``torch.utils.data.DataLoader`` serving ``batches()`` as tensors, one batch per item."""
    import keras
    import torch.utils.data as torch_data

    class Served(torch_data.IterableDataset):
        def __iter__(self) -> Iterator[Batch]:
            for batch in batches():
                yield _map(keras.ops.convert_to_tensor, batch)

    return torch_data.DataLoader(Served(), batch_size=None)


def with_class_weight(batch: Batch, class_weight: Mapping[int, float], floatx: str) -> Batch:
    """Adds Keras's per-row weights for ``fit(class_weight=...)`` (as Keras does, vectorized).

    As ``keras.src.trainers.data_adapters.data_adapter_utils.class_weight_to_sample_weights``:
    one-hot (or probability) labels count by their argmax, a trailing axis of
    1 is squeezed, labels are rounded to integers, classes not named weigh 1.
    """
    if len(batch) != 2:
        raise ArgumentError(
            describe(
                "fit(class_weight=...) was given with per-row weights or without labels",
                expected="labels and no sample_weight column",
                found=f"a batch of {len(batch)} parts",
                fix="use class_weight= or to_keras(sample_weight=...), not both",
            )
        )
    x, y = batch
    if isinstance(y, (tuple, dict)):
        raise ArgumentError(
            describe(
                "fit(class_weight=...) needs one label",
                found="several labels",
                fix="weigh rows with to_keras(sample_weight=...) instead",
            )
        )
    labels = np.asarray(y)
    if labels.ndim > 1:
        labels = np.argmax(labels, axis=-1) if labels.shape[-1] != 1 else np.squeeze(labels, axis=-1)
    labels = np.round(labels).astype(np.int64)
    classes = np.array(sorted(int(key) for key in class_weight), dtype=np.int64)
    weights = np.array([float(class_weight[key]) for key in sorted(class_weight, key=int)], dtype=floatx)
    found = np.searchsorted(classes, labels).clip(0, max(len(classes) - 1, 0))
    known = classes[found] == labels if len(classes) else np.zeros(len(labels), bool)
    return x, y, np.where(known, weights[found] if len(classes) else 1.0, 1.0).astype(floatx)
