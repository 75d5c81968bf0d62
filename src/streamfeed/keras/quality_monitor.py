"""A Keras callback that watches label noise and image quality while ``fit`` trains, on every backend.

Keras callbacks never see the batch, so :class:`DataQualityMonitor` taps
the :class:`~streamfeed.keras.KerasDataset` (``add_batch_listener``): every
batch served is kept under its number in the epoch until
``on_train_batch_end`` reports that number trained, then measured and
dropped. Batches served outside ``fit``'s training (``evaluate``,
``predict``, ``fit``'s validation: between ``on_test_begin`` or
``on_predict_begin`` and their ends, or before ``on_train_begin``) are
not kept at all: none of them is trained. Keras reads ahead a few
batches and replays the ones it peeked at before an epoch, so what is
held is the read-ahead (at most 256 batches). With
``steps_per_execution = k`` Keras reports one batch end per execution (its
last step): every kept batch up to it is measured then, with the weights
after the whole execution, a little later than one step after it was
trained.

The margins need the model's outputs for the trained rows, which ``fit``
does not hand out: the monitor runs one forward pass,
``model.predict_on_batch(x)`` (compiled on every backend), after the step
(on JAX the callback's ``self.model`` first copies the trained weights back
into the model). That is the forward half of a training step. Besides, a
callback with a batch hook makes Keras dispatch batch ends synchronously
and turn ``logs`` into Python numbers every step
(``keras/src/callbacks/callback_list.py``), a device-host sync that
``every=n`` (measure every n-th batch only; the AUM is then a mean over
fewer margins per row) does not remove. ``docs/self-healing.md`` quotes
the measured cost; the method and why is in :mod:`.label_noise`.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import keras
import numpy as np

from ..errors import ArgumentError, describe
from ..inspect.image_quality import BRIGHT, DARK, laplacian_variance
from ..inspect.suspects_html import write_suspects_html
from .label_noise import RECENT, MarginLedger, margins_and_losses

logger = logging.getLogger("streamfeed")
# Batches kept at most: Keras's read-ahead (TensorFlow's feed pulls blocks of up to 64 batches, keras/feeds.py)
# is far below; a bound all the same, as a dataset could serve batches fit never reports trained.
_MAX_KEPT = 256
_LUMA = np.array([0.299, 0.587, 0.114])  # Pillow's RGB -> L weights, as inspect's image report uses


class DataQualityMonitor(keras.callbacks.Callback):
    """Estimates the label-noise rate and ranks suspect rows during ``fit``; summarises trained images.

    Args:
        dataset: the :class:`~streamfeed.keras.KerasDataset` given to ``fit``,
            made with ``ids=`` (a unique row id; ``path`` for image folders)
            and one ``label=`` (class ids or one-hot).
        every: measure every ``every``-th batch of an epoch (1: all of them).
        max_rows: track at most this many rows, a uniform sample chosen by
            id hash (memory: about 190 bytes per tracked row, plus the id's
            own size for string ids); ``None``: every row.
        threshold: the margin below which a row is misranked (0: another
            class scores above the given label).
        verbose: also print the per-epoch line, not only log it.

    Method: the area under the margin (AUM, Pleiss et al. 2020), the mean
    over training of each row's margin between its given label's score and
    the largest other one, thresholded at 0 instead of with an extra fake
    class (a callback cannot add one to the user's model), ranks the
    suspects; the estimated noise rate is the share of rows misranked in
    each of their last three measurements, so that warm-up epochs do not
    count and the estimate does not fall with training length alone. Why,
    and its biases, in :mod:`.label_noise` and ``docs/self-healing.md``.

    Refused with :class:`~streamfeed.errors.ArgumentError` (training stops,
    as a wrong estimate would be worse than none): outputs holding NaN or
    infinity (a diverged model), float labels that are not whole numbers,
    labels outside the model's classes, NaN ids, and an id trained twice in
    one epoch (ids that are not unique would merge rows).

    Per epoch it adds ``label_noise_rate`` (and, for image inputs,
    ``image_blur_median``, ``image_brightness_mean``, ``image_dark_share``,
    ``image_bright_share``) to Keras's ``logs`` (so to ``History``), logs one
    line to the ``streamfeed`` logger and appends a dict to ``history``.
    :meth:`write_suspects` writes the ranked suspects as JSON lines,
    :meth:`write_suspects_html` as a page with each image's thumbnail.
    """

    def __init__(
        self,
        dataset: Any,
        *,
        every: int = 1,
        max_rows: int | None = None,
        threshold: float = 0.0,
        verbose: bool = False,
    ) -> None:
        super().__init__()
        if not hasattr(dataset, "add_batch_listener"):
            raise ArgumentError(
                describe(
                    "DataQualityMonitor needs the streamfeed Keras dataset given to fit",
                    found=type(dataset).__name__,
                    fix="pass train = ds.to_keras(..., ids='id') as dataset= and to model.fit",
                )
            )
        if getattr(dataset, "ids", None) is None:
            raise ArgumentError(
                describe(
                    "DataQualityMonitor needs a row id per row",
                    where="the KerasDataset given as dataset=",
                    expected="to_keras(..., ids=COLUMN), a column unique per row",
                    found="no ids=",
                    fix="pass ids= to to_keras (for image folders, ids='path')",
                )
            )
        if len(getattr(dataset, "labels", [])) != 1:
            raise ArgumentError(
                describe(
                    "DataQualityMonitor needs exactly one label column",
                    found=f"labels {getattr(dataset, 'labels', None)}",
                    fix="pass one label= (class ids or one-hot) to to_keras",
                )
            )
        if int(every) < 1:
            raise ArgumentError(describe("every= must be at least 1", found=str(every), fix="pass every=1 or more"))
        self.dataset, self.every, self.verbose = dataset, int(every), bool(verbose)
        self.ledger = MarginLedger(max_rows=max_rows, threshold=threshold)
        self.history: list[dict[str, float]] = []
        self._kept: dict[int, tuple[tuple, np.ndarray]] = {}
        # Batches are kept only while fit trains: evaluate and predict (+111 MiB over a 64 MiB limit, measured
        # when they were kept) and fit's validation serve batches that on_train_batch_end never reports.
        self._fitting = self._testing = self._training = False
        self._lock = threading.Lock()  # TensorFlow serves batches from a tf.data thread
        self._epoch_stats = _EpochStats()
        dataset.add_batch_listener(self._served)

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

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._epoch_stats = _EpochStats()
        self.ledger.begin_epoch()

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        with self._lock:
            numbers = sorted(n for n in self._kept if n <= batch)
            trained = [self._kept.pop(n) for n in numbers]
        for packed, ids in trained:
            self._measure(packed, ids)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        stats = {"label_noise_rate": self.ledger.noise_rate(), **self._epoch_stats.summary()}
        if logs is not None:  # History gets the estimate and the image summaries, not the monitor's own timing
            logs.update({key: value for key, value in stats.items() if key not in ("measure_seconds", "rows_measured")})
        self.history.append(stats)
        line = (
            f"epoch {epoch + 1}: estimated label noise {100 * stats['label_noise_rate']:.1f} % "
            f"of {len(self.ledger)} rows tracked (misranked in their last {RECENT} measurements); "
            f"{stats['measure_seconds']:.2f} s measuring {stats['rows_measured']:.0f} rows"
        )
        if "image_blur_median" in stats:
            dark, bright = 100 * stats["image_dark_share"], 100 * stats["image_bright_share"]
            line += (
                f"; images: blur median {stats['image_blur_median']:.0f}, brightness "
                f"{stats['image_brightness_mean']:.0f}, {dark:.1f} % near-black, {bright:.1f} % near-white"
            )
        logger.info("%s", line)
        if self.verbose:
            print(line, flush=True)

    # ------------------------------------------------------------ measure
    def _measure(self, packed: tuple, ids: np.ndarray) -> None:
        started = time.perf_counter()
        x, y = packed[0], packed[1]
        weight = packed[2] if len(packed) > 2 else None
        outputs = self.model.predict_on_batch(x)
        if isinstance(outputs, (list, tuple, dict)):
            raise ArgumentError(
                describe(
                    "DataQualityMonitor needs a model with one output",
                    found=f"{type(outputs).__name__} of outputs",
                    fix="monitor a single-output classifier",
                )
            )
        scores = keras.ops.convert_to_numpy(outputs)
        labels = np.asarray(y)
        if weight is not None:  # padded rows (last_batch="pad") have weight 0: not trained
            real = np.asarray(weight).reshape(len(ids)) > 0
            scores, labels, ids = scores[real], labels[real], ids[real]
            x = x[real] if isinstance(x, np.ndarray) else x
        margins, losses = margins_and_losses(scores, labels)
        self.ledger.add(ids, labels, margins, losses)
        if isinstance(x, np.ndarray) and x.ndim in (3, 4):
            self._epoch_stats.add_images(x)
        self._epoch_stats.add_time(time.perf_counter() - started, len(ids))

    # ------------------------------------------------------------ report
    def noise_rate(self) -> float:
        """The current estimate of the share of mislabelled rows."""
        return self.ledger.noise_rate()

    def suspects(self, top: int | None = None) -> list[dict[str, Any]]:
        """Suspect rows, most suspect first (the rows the estimate counts, or the ``top`` lowest AUM)."""
        found = self.ledger.suspects(top)
        for row in found:
            if isinstance(row["id"], str) and os.path.isfile(row["id"]):
                row["path"] = row["id"]
        return found

    def write_suspects(self, path: str | os.PathLike, top: int | None = None) -> int:
        """Writes :meth:`suspects` as JSON lines to ``path`` (whole, never through a link); returns the count."""
        from ..files.atomic import atomic_open

        target = Path(path)
        rows = self.suspects(top)
        with atomic_open(target) as handle:
            for row in rows:
                handle.write(json.dumps(row) + "\n")
        return len(rows)

    def write_suspects_html(self, path: str | os.PathLike, top: int | None = None) -> int:
        """Writes :meth:`suspects` as an ``inspect --html``-style page with each image's thumbnail; returns the count.

        For image inputs (``ids="path"``): each suspect's picture, rank,
        path, given label (with its class name from the image folder) and
        evidence (mean margin, last margin, mean loss, times trained), most
        suspect first (:mod:`streamfeed.inspect.suspects_html`). Ids that
        are not files get a card without a picture.
        """
        names = self.dataset.dataset.source.info.class_names or None
        return write_suspects_html(
            path,
            self.suspects(top),
            noise_rate=self.ledger.noise_rate(),
            tracked=len(self.ledger),
            class_names=list(names) if names is not None else None,
        )


class _EpochStats:
    """What was measured in one epoch: time spent, rows, and image blur and brightness."""

    def __init__(self) -> None:
        self.seconds, self.rows = 0.0, 0
        self.blur: list[float] = []
        self.brightness: list[float] = []

    def add_time(self, seconds: float, rows: int) -> None:
        self.seconds += seconds
        self.rows += rows

    def add_images(self, images: np.ndarray) -> None:
        """Blur (variance of the Laplacian) and mean brightness of each image, on a 0-255 greyscale."""
        pixels = np.asarray(images, dtype=np.float64)
        if pixels.ndim == 4:
            pixels = pixels @ _LUMA if pixels.shape[-1] == 3 else pixels.mean(axis=-1)
        if pixels.size and pixels.max() <= 1.0:  # already scaled to [0, 1]
            pixels = pixels * 255.0
        self.blur.extend(laplacian_variance(image) for image in pixels)
        self.brightness.extend(pixels.mean(axis=(1, 2)).tolist())

    def summary(self) -> dict[str, float]:
        stats = {"measure_seconds": self.seconds, "rows_measured": float(self.rows)}
        if self.blur:
            brightness = np.asarray(self.brightness)
            stats.update(
                image_blur_median=float(np.median(self.blur)),
                image_brightness_mean=float(brightness.mean()),
                image_dark_share=float(np.mean(brightness < DARK)),
                image_bright_share=float(np.mean(brightness > BRIGHT)),
            )
        return stats
