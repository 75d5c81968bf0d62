"""The batches ``fit`` trained, each handed to a callback once, after its step: the tap under the
quality monitor and the hard-example miner.

Keras callbacks never see the batch, so :class:`TrainedBatchTap` taps the
:class:`~streamfeed.keras.KerasDataset` (``add_batch_listener``): every
batch served is kept under its number in the epoch until
``on_train_batch_end`` reports that number trained, then measured
(:meth:`TrainedBatchTap.measure`) and dropped. Batches served outside
``fit``'s training (``evaluate``, ``predict``, ``fit``'s validation:
between ``on_test_begin`` or ``on_predict_begin`` and their ends, or
before ``on_train_begin``) are not kept at all: none of them is trained.
Keras reads ahead a few batches and replays the ones it peeked at before
an epoch, so what is held is the read-ahead (at most 256 batches). With
``steps_per_execution = k`` Keras reports one batch end per execution (its
last step): every kept batch up to it is measured then, with the weights
after the whole execution. A tap whose measurements go into the data
state also measures when a state is taken (:meth:`TrainedBatchTap.flush`),
so the state holds every trained batch's, whichever callback runs first.

The measurements need the model's outputs for the trained rows, which
``fit`` does not hand out: :func:`forward_margins` runs one forward pass,
``model.predict_on_batch(x)`` (compiled on every backend), after the step
(on JAX the callback's ``self.model`` first copies the trained weights
back into the model).
"""

from __future__ import annotations

import threading
from typing import Any

import keras
import numpy as np

from ..errors import ArgumentError, describe
from .label_noise import margins_and_losses

# Batches kept at most: Keras's read-ahead (TensorFlow's feed pulls blocks of up to 64 batches, keras/feeds.py)
# is far below; a bound all the same, as a dataset could serve batches fit never reports trained.
_MAX_KEPT = 256


class TrainedBatchTap(keras.callbacks.Callback):
    """Keeps each batch ``fit`` serves until it is trained, then calls :meth:`measure` with it.

    ``owner`` names the subclass in refusals; ``every``: measure every n-th
    batch of an epoch only; ``flushes``: also measure when the dataset's
    state is taken (see the module).
    """

    def __init__(self, dataset: Any, *, owner: str, every: int = 1, flushes: bool = False) -> None:
        super().__init__()
        if not hasattr(dataset, "add_batch_listener"):
            raise ArgumentError(
                describe(
                    f"{owner} needs the streamfeed Keras dataset given to fit",
                    found=type(dataset).__name__,
                    fix="pass train = ds.to_keras(..., ids='id') as dataset= and to model.fit",
                )
            )
        if getattr(dataset, "ids", None) is None:
            raise ArgumentError(
                describe(
                    f"{owner} needs a row id per row",
                    where="the KerasDataset given as dataset=",
                    expected="to_keras(..., ids=COLUMN), a column unique per row",
                    found="no ids=",
                    fix="pass ids= to to_keras (for image folders, ids='path')",
                )
            )
        if len(getattr(dataset, "labels", [])) != 1:
            raise ArgumentError(
                describe(
                    f"{owner} needs exactly one label column",
                    found=f"labels {getattr(dataset, 'labels', None)}",
                    fix="pass one label= (class ids or one-hot) to to_keras",
                )
            )
        if int(every) < 1:
            raise ArgumentError(describe("every= must be at least 1", found=str(every), fix="pass every=1 or more"))
        self.dataset, self.every = dataset, int(every)
        self._kept: dict[int, tuple[tuple, np.ndarray]] = {}
        # Batches are kept only while fit trains: evaluate and predict (+111 MiB over a 64 MiB limit, measured
        # when they were kept) and fit's validation serve batches that on_train_batch_end never reports.
        self._fitting = self._testing = self._training = False
        self._lock = threading.Lock()  # TensorFlow serves batches from a tf.data thread
        dataset.add_batch_listener(self._served, flush=self.flush if flushes else None)

    def measure(self, packed: tuple, ids: np.ndarray) -> None:
        """Measures one trained batch (the ``(x, y[, w])`` Keras got, and its ids)."""
        raise NotImplementedError

    # ------------------------------------------------------------ the tap
    def _served(self, number: int, packed: tuple, ids: np.ndarray | None) -> None:
        if not self._training or number % self.every or ids is None or len(packed) < 2:
            return  # outside fit's training (evaluate, predict, fit's validation) no batch is trained: none kept
        with self._lock:
            if number == 0:  # a new stream (an epoch, or a peek's replay): what is kept is of the old one
                self._kept.clear()
            self._kept[number] = (packed, ids)
            if len(self._kept) > _MAX_KEPT:
                del self._kept[min(self._kept)]

    def flush(self, trained: int) -> None:
        """Measures every kept batch among the first ``trained`` of the epoch (they are trained)."""
        with self._lock:
            numbers = sorted(n for n in self._kept if n < trained)
            batches = [self._kept.pop(n) for n in numbers]
        for packed, ids in batches:
            self.measure(packed, ids)

    # -------------------------------------------------------- Keras hooks
    def on_train_begin(self, logs: dict | None = None) -> None:
        self._set(fitting=True)

    def on_train_end(self, logs: dict | None = None) -> None:
        self._set(fitting=False)

    def on_test_begin(self, logs: dict | None = None) -> None:  # also fit's validation, on fit's callbacks
        self._set(testing=True)

    def on_test_end(self, logs: dict | None = None) -> None:
        self._set(testing=False)

    def on_predict_begin(self, logs: dict | None = None) -> None:
        self._set(testing=True)

    def on_predict_end(self, logs: dict | None = None) -> None:
        self._set(testing=False)

    def _set(self, *, fitting: bool | None = None, testing: bool | None = None) -> None:
        """Whether served batches are kept: while ``fit`` trains only; leaving it drops what is kept (never trained)."""
        with self._lock:
            self._fitting = self._fitting if fitting is None else fitting
            self._testing = self._testing if testing is None else testing
            self._training = self._fitting and not self._testing
            if not self._training:
                self._kept.clear()

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self.flush(batch + 1)


def forward_margins(model: Any, packed: tuple, ids: np.ndarray, *, owner: str) -> tuple[np.ndarray, ...]:
    """``(ids, labels, margins, losses, x)`` of a trained batch's real rows, from one forward pass.

    Rows a padded last batch added (sample weight 0, ``last_batch="pad"``)
    were not trained and are left out.
    """
    x, y = packed[0], packed[1]
    weight = packed[2] if len(packed) > 2 else None
    outputs = model.predict_on_batch(x)
    if isinstance(outputs, (list, tuple, dict)):
        raise ArgumentError(
            describe(
                f"{owner} needs a model with one output",
                found=f"{type(outputs).__name__} of outputs",
                fix="use a single-output classifier",
            )
        )
    scores = keras.ops.convert_to_numpy(outputs)
    labels = np.asarray(y)
    if weight is not None:  # padded rows (last_batch="pad") have weight 0: not trained
        real = np.asarray(weight).reshape(len(ids)) > 0
        scores, labels, ids = scores[real], labels[real], ids[real]
        x = x[real] if isinstance(x, np.ndarray) else x
    margins, losses = margins_and_losses(scores, labels)
    return ids, labels, margins, losses, x
