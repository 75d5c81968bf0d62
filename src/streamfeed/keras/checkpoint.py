"""Saving the data state with the model, and resuming mid-epoch.

    ckpt = DataCheckpoint(train, "ckpt/", every=100)
    model.fit(train, epochs=5, initial_epoch=ckpt.initial_epoch, callbacks=[ckpt])

Every ``every`` trained batches and at each epoch end, the callback writes
the model's weights (with optimizer state) and ``data_state.json``: the
data state (:meth:`KerasDataset.get_state`) after the last batch *trained*,
which the callback counts in ``on_train_batch_end``, not the last batch
Keras read ahead. Restarted in a new process with the same pipeline, it
restores both when training begins (:meth:`KerasDataset.set_state`), and
the resumed epoch serves exactly the batches an uninterrupted run would
have served next.

Weights and position are one checkpoint: each save writes a new weights
file, then atomically replaces ``data_state.json``, which names that file;
only then are older weights files removed. A crash at any point leaves a
state file whose weights match it.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import keras

from .adapter import KerasDataset

logger = logging.getLogger("streamfeed")
STATE_FILE = "data_state.json"
WEIGHTS_PATTERN = "model-{:06d}.weights.h5"


def _atomic_write_json(path: Path, data: dict) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(data, indent=1))
    os.replace(temporary, path)


class DataCheckpoint(keras.callbacks.Callback):
    """Checkpoints model weights and the data position together.

    Args:
        dataset: the :class:`KerasDataset` given to ``fit``.
        directory: where the checkpoint lives (created if needed).
        every: also save every ``every`` trained batches (``None``: only at
            epoch ends).
        save_model: save and restore the model's weights too (default).
    """

    def __init__(
        self, dataset: KerasDataset, directory: str | os.PathLike, *, every: int | None = None, save_model: bool = True
    ) -> None:
        super().__init__()
        self.dataset = dataset
        self.directory = Path(directory)
        self.every = every
        self.save_model = save_model
        self._epoch, self._trained = 0, 0
        self._saved: dict[str, Any] | None = None
        state_path = self.directory / STATE_FILE
        if state_path.exists():
            self._saved = json.loads(state_path.read_text())
        self._saves = int(self._saved.get("save_number", 0)) if self._saved else 0

    @property
    def initial_epoch(self) -> int:
        """The Keras epoch to pass as ``fit(initial_epoch=...)`` (0 without a checkpoint)."""
        return int(self._saved["keras_epoch"]) if self._saved else 0

    def on_train_begin(self, logs: dict | None = None) -> None:
        if self._saved is None:
            return
        self.dataset.set_state(self._saved["data"])
        weights = self.directory / self._saved.get("weights", "")
        if self.save_model and self._saved.get("weights") and weights.exists():
            self._build_optimizer()
            self.model.load_weights(weights)
        logger.info(
            "resumed from %s: Keras epoch %d, data epoch %d at %s",
            self.directory,
            self.initial_epoch,
            self._saved["data"]["epoch"],
            {k: self._saved["data"][k] for k in ("unit", "offset")},
        )

    def _build_optimizer(self) -> None:
        """Creates the optimizer's variables so that loading fills them.

        The TensorFlow backend builds the optimizer only when it traces the
        first train step, after ``on_train_begin``; loading into an unbuilt
        optimizer skips its state (momentum, iteration count) with a mere
        warning, and the resumed run diverges from the uninterrupted one.
        """
        optimizer = getattr(self.model, "optimizer", None)
        if optimizer is not None and not optimizer.built:
            optimizer.build(self.model.trainable_variables)

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._epoch, self._trained = epoch, 0

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        # With steps_per_execution, `batch` is the last step of the execution,
        # numbered as if a short last execution were full, and the count
        # jumps: save whenever it passes a multiple of `every`.
        epoch_batches = self.dataset.num_batches
        before, self._trained = self._trained, min(batch + 1, epoch_batches)
        if self.every and self._trained // self.every > before // self.every:
            # After the epoch's last batch the data state is the next epoch's
            # start, so the Keras epoch to resume at is the next one too.
            finished = self._trained >= epoch_batches
            self._save(keras_epoch=self._epoch + finished, trained=self._trained)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self._save(keras_epoch=epoch + 1, trained=self._trained)

    def _save(self, *, keras_epoch: int, trained: int) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._saves += 1
        state: dict[str, Any] = {
            "keras_epoch": keras_epoch,
            "data": self.dataset.get_state(trained),
            "save_number": self._saves,
        }
        if self.save_model:
            state["weights"] = weights = WEIGHTS_PATTERN.format(self._saves)
            self.model.save_weights(self.directory / weights)
        _atomic_write_json(self.directory / STATE_FILE, state)
        for old in self.directory.glob(WEIGHTS_PATTERN.replace("{:06d}", "*")):
            if old.name != state.get("weights"):
                old.unlink(missing_ok=True)
