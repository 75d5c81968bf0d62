"""A Keras callback that watches label noise and image quality while ``fit`` trains, on every backend.

It measures each batch ``fit`` trained, once, after its step, through
:class:`~.trained_batches.TrainedBatchTap` (which batches are kept, for how
long, and with ``steps_per_execution``): one forward pass,
``model.predict_on_batch(x)``, with the trained weights. That is the forward half of a training step. Besides, a
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
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..inspect.image_quality import BRIGHT, DARK, laplacian_variance
from ..inspect.suspects_html import write_suspects_html
from .label_noise import RECENT, MarginLedger
from .trained_batches import TrainedBatchTap, forward_margins

logger = logging.getLogger("streamfeed")
_LUMA = np.array([0.299, 0.587, 0.114])  # Pillow's RGB -> L weights, as inspect's image report uses


class DataQualityMonitor(TrainedBatchTap):
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
        super().__init__(dataset, owner="DataQualityMonitor", every=every)
        self.verbose = bool(verbose)
        self.ledger = MarginLedger(max_rows=max_rows, threshold=threshold)
        self.history: list[dict[str, float]] = []
        self._epoch_stats = _EpochStats()

    # -------------------------------------------------------- Keras hooks
    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._epoch_stats = _EpochStats()
        self.ledger.begin_epoch()

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
    def measure(self, packed: tuple, ids: np.ndarray) -> None:
        """Adds one trained batch's margins to the ledger and its images to the epoch's summary."""
        started = time.perf_counter()
        ids, labels, margins, losses, x = forward_margins(self.model, packed, ids, owner="DataQualityMonitor")
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
