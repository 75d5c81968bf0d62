"""The boundary with Keras: one object for fit, evaluate and predict.

:class:`KerasDataset` is a ``keras.utils.PyDataset`` — the one input type
Keras 3 accepts on the TensorFlow, JAX and PyTorch backends with the number
of steps known — served by a streamfeed epoch running in background
threads. It serves batches in the pipeline's own order: Keras's
``shuffle=True`` (fit's default) asks for batch indices in random order,
which for a stream would mean random reads (4x slower, measured); the
pipeline's seeded shuffle replaces it, so the index Keras asks for is not
used.

Keras reads ahead of training (the TF backend through a prefetching
tf.data pipeline, and it also peeks at batches to build the model), so the
last batch served is not the last batch trained. The state after every
served batch is kept, keyed by its number in the epoch; the checkpoint
callback saves the entry of the last batch trained. Epochs advance only
when one was served completely after ``on_epoch_begin`` and Keras ended it
(rather than abandoning it with ``EpochIterator.reset()``), so peeks
restart the epoch instead of consuming it.
"""

from __future__ import annotations

import collections
import logging
import sys
from typing import Any, Literal, Sequence

import keras
import numpy as np

from ..core import Chunk, Position
from ..errors import DataError, SchemaError, describe
from ..pipeline import Dataset, EpochIterator
from ..transforms.batch import PAD_MASK
from .packing import X, Y, W, IDS, pack_columns
from .validation import check_model_inputs

logger = logging.getLogger("streamfeed")
_KEEP_POSITIONS = 4096  # far more batches than any Keras read-ahead
_PEEK_BATCHES = 4  # Keras peeks at one or two batches before an epoch


def _is_keras_epoch_iterator(obj: Any) -> bool:
    return any(cls.__name__ == "EpochIterator" and cls.__module__.startswith("keras") for cls in type(obj).__mro__)


def _called_from_keras_reset() -> bool:
    """True when Keras's ``EpochIterator.reset()`` is what ends the epoch.

    Keras resets its epoch iterator to abandon an epoch, never to finish
    one: after peeking at batches to build the model (on JAX and PyTorch
    the peek goes through ``on_epoch_begin``) and before each evaluation.
    A one-batch epoch peeked at that way was served in full, and without
    this check it would count as done: training would start one data
    epoch late and the checkpoints would be off by one epoch.
    """
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "reset" and _is_keras_epoch_iterator(frame.f_locals.get("self")):
            return True
        frame = frame.f_back
    return False


class KerasDataset(keras.utils.PyDataset):
    """A streamfeed pipeline as Keras input, on every backend.

    Args:
        dataset: a batched :class:`streamfeed.Dataset`.
        features: feature columns; by default every column that is not the
            label, the sample weight or the ids.
        label: label column (or a list of them, given to Keras as a tuple);
            ``None`` for inputs only (``predict``).
        sample_weight: column of per-row weights.
        ids: a column kept out of the model and collected per epoch, so
            predictions can be matched to rows (:meth:`served_ids`).
        inputs: ``"matrix"`` stacks features into one ``(batch, n)`` array
            of ``dtype`` (a single feature of images or other n-D rows keeps
            its shape, e.g. ``(batch, h, w, c)``); ``"dict"`` gives Keras a dict keyed by column
            name, matching a functional model's input names.
        dtype: dtype of the feature matrix (or of numeric dict inputs).
        label_dtype: dtype of labels; by default as stored.
        model: if given, the first batch is checked against its inputs
            before Keras sees it, with a message naming column and input.
    """

    def __init__(
        self,
        dataset: Dataset,
        *,
        features: Sequence[str] | None = None,
        label: str | Sequence[str] | None = None,
        sample_weight: str | None = None,
        ids: str | None = None,
        inputs: Literal["matrix", "dict"] = "matrix",
        dtype: str = "float32",
        label_dtype: str | None = None,
        model: Any = None,
    ) -> None:
        super().__init__(workers=1, use_multiprocessing=False)
        if dataset.batch_size is None:
            raise ValueError("to_keras() needs a batched dataset: call .batch(batch_size) first")
        labels = [label] if isinstance(label, str) else list(label or [])
        columns = dataset.column_names  # the source's, plus columns added by map functions
        reserved = set(labels) | {sample_weight, ids} - {None}
        features = [name for name in columns if name not in reserved] if features is None else list(features)
        missing = [name for name in [*features, *reserved] if name not in columns]
        if missing:
            raise SchemaError(
                describe(
                    f"Columns {missing} are not in the dataset",
                    expected=f"names among {columns}",
                    fix="check features=, label=, sample_weight= and ids=, and the columns= you read",
                )
            )
        self.features, self.labels, self.label_is_list = features, labels, not isinstance(label, (str, type(None)))
        self.inputs, self.model = inputs, model
        pack = pack_columns(features, labels, sample_weight, ids, inputs=inputs, dtype=dtype, label_dtype=label_dtype)
        self.dataset = dataset._with(row_ops=dataset.row_ops + (pack,))
        self._epoch = 0
        self._start = Position()
        self._stream: EpochIterator | None = None
        self._begun = False
        self._served = 0
        self._positions: collections.OrderedDict[int, Position] = collections.OrderedDict()
        self._ids: list[np.ndarray] = []
        # The first batches of the current stream, kept so that after a Keras
        # peek the epoch replays them instead of reading (decoding) them again.
        self._head: list[tuple[Chunk, Position]] | None = []
        self._replay: collections.deque[tuple[Chunk, Position]] = collections.deque()
        self._stream_start: tuple[int, Position] | None = None
        self._checked = model is None
        self._closed_wait_seconds = 0.0  # of streams already closed

    # ------------------------------------------------------------ PyDataset API
    @property
    def num_batches(self) -> int:
        """Batches left in the current epoch (all of them unless resumed mid-epoch)."""
        return self.dataset.num_batches(self._epoch, self._start)

    def __len__(self) -> int:
        return self.num_batches

    def __getitem__(self, index: int) -> tuple:
        if self._stream is None:
            self._open(begun=False)
        batch, position = self._replay.popleft() if self._replay else self._read()
        self._positions[self._served] = position
        if len(self._positions) > _KEEP_POSITIONS:
            self._positions.popitem(last=False)
        self._served += 1
        if not self._checked:
            check_model_inputs(self.model, batch, self.features, self.inputs)
            self._checked = True
        return self._to_keras(batch)

    def _read(self) -> tuple[Chunk, Position]:
        try:
            batch = next(self._stream)
        except StopIteration:
            raise DataError(
                describe(
                    "The epoch ended before Keras got the batches it was promised",
                    where=f"epoch {self._epoch}, after {self._served} batches",
                    expected=f"{self.num_batches} batches",
                    found=f"{self._served}; skipped input: {self.dataset.report.to_dict()['entries']}",
                    fix="inspect the files named in the report; rows were lost while reading",
                )
            ) from None
        entry = (batch, self._stream.position)
        if self._head is not None:
            self._head = self._head + [entry] if len(self._head) < _PEEK_BATCHES else None
        return entry

    def on_epoch_begin(self) -> None:
        self._open(begun=True)

    def on_epoch_end(self) -> None:
        complete = self._begun and self._stream is not None and self._served == self.num_batches
        complete = complete and not _called_from_keras_reset()
        if complete:
            self._close_stream()
            self._epoch, self._start = self._epoch + 1, Position()
        elif self._head is None:  # abandoned after more than a peek: nothing to replay
            self._close_stream()

    # ---------------------------------------------------------------- helpers
    def _open(self, *, begun: bool) -> None:
        start = (self._epoch, self._start)
        if self._stream is not None and self._head is not None and self._stream_start == start:
            # Restarting right after a peek: serve the peeked batches again.
            self._replay = collections.deque(self._head)
        else:
            self._close_stream()
            self._stream = self.dataset.iter_epoch(self._epoch, self._start)
            self._stream_start, self._head, self._replay = start, [], collections.deque()
        self._begun, self._served = begun, 0
        self._positions.clear()
        self._ids = []

    def _close_stream(self) -> None:
        if self._stream is not None:
            self._closed_wait_seconds += self._stream.wait_seconds
            self._stream.close()
            self._stream = None
        self._head, self._replay = [], collections.deque()

    def _to_keras(self, batch: Chunk) -> tuple:
        if IDS in batch:
            self._ids.append(batch[IDS])
        weight = batch.get(W)
        if PAD_MASK in batch:
            weight = batch[PAD_MASK] if weight is None else weight * batch[PAD_MASK]
        x = batch[X] if self.inputs == "matrix" else {name: batch[X + name] for name in self.features}
        if not self.labels:
            return (x,) if weight is None else (x, None, weight)
        y = tuple(batch[Y + name] for name in self.labels) if self.label_is_list else batch[Y + self.labels[0]]
        return (x, y) if weight is None else (x, y, weight)

    @property
    def input_wait_seconds(self) -> float:
        """Total time ``__getitem__`` blocked on the pipeline, over all epochs so far.

        Monotonic: :class:`InputStallMonitor` takes its difference per epoch.
        """
        return self._closed_wait_seconds + (self._stream.wait_seconds if self._stream is not None else 0.0)

    # ------------------------------------------------------------------ state
    @property
    def epoch(self) -> int:
        """The data epoch being (or next to be) served."""
        return self._epoch

    def state_after(self, trained: int) -> dict:
        """State to save when ``trained`` batches of the current epoch were trained.

        ``trained`` may exceed the epoch's batches: with ``steps_per_execution``
        Keras numbers a short last execution as if it were full.
        """
        if trained <= 0 or self._stream is None:  # between epochs: the next one's start
            return self.dataset.make_state(self._epoch, self._start)
        if trained >= self.num_batches:
            return self.dataset.make_state(self._epoch + 1, Position())
        position = self._positions.get(trained - 1)
        if position is None:
            raise KeyError(f"no position recorded for batch {trained - 1} of epoch {self._epoch}")
        return self.dataset.make_state(self._epoch, position)

    def restore(self, state: dict) -> None:
        """Continues from a saved state at the next epoch start."""
        self._epoch, self._start = self.dataset.parse_state(state)
        self._close_stream()

    def served_ids(self) -> np.ndarray:
        """The ``ids`` column of the batches served in the current or last epoch."""
        return np.concatenate(self._ids) if self._ids else np.empty(0)

    def check(self, model: Any) -> None:
        """Checks one batch against ``model``'s inputs; raises naming column and input."""
        with self.dataset.iter_epoch(self._epoch, self._start) as stream:
            check_model_inputs(model, next(stream), self.features, self.inputs)

    def close(self) -> None:
        """Stops the background threads of the current epoch, if any."""
        self._close_stream()

    def __enter__(self) -> "KerasDataset":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
