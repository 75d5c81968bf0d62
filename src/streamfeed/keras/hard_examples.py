"""The Keras half of hard-example sampling: a callback that scores each trained row by its loss.

``Dataset.hard_examples()`` draws epoch ``e`` from the rows' losses as
they stood when epoch ``e - 1`` ended (:mod:`streamfeed.hard_examples`).
:class:`HardExampleMiner` measures them: after each trained batch, one
forward pass (:mod:`.trained_batches`) gives each row's cross-entropy
for its label, which goes into the sampler's scores; at the end of each
completed epoch it freezes them for the next. The scores travel in the
data state (``KerasDataset.get_state``, so in ``DataCheckpoint``), which
takes the miner's measurements of every trained batch first, whichever
callback runs first: a resumed run draws and scores as the uninterrupted
one would.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ArgumentError, describe
from ..hard_examples import HardExampleSampler
from .trained_batches import TrainedBatchTap, forward_margins
from .workers import jax_gather, rows_exchange


class HardExampleMiner(TrainedBatchTap):
    """Scores the rows ``fit`` trains for ``hard_examples()``, on every backend.

    Args:
        dataset: the :class:`~streamfeed.keras.KerasDataset` given to
            ``fit``, made from a ``hard_examples(ids=COLUMN)`` dataset with
            ``to_keras(ids=COLUMN)`` and one ``label=`` of class ids (or one-hot).
        every: measure every ``every``-th batch of an epoch only (the
            rows of the others keep their older scores).

    Cost: one forward pass per measured batch (the forward half of a
    training step), and the synchronous batch end any batch callback makes
    Keras take (``docs/self-healing.md`` measures it for the quality monitor).
    """

    def __init__(self, dataset: Any, *, every: int = 1) -> None:
        super().__init__(dataset, owner="HardExampleMiner", every=every, flushes=True)
        sampler = getattr(getattr(dataset, "dataset", None), "sampler", None)
        if not isinstance(sampler, HardExampleSampler):
            raise ArgumentError(
                describe(
                    "HardExampleMiner needs a dataset made with hard_examples()",
                    found=f"sampler {type(sampler).__name__}",
                    fix="train = ds.hard_examples(ids='id').batch(n).to_keras(label=..., ids='id')",
                )
            )
        if dataset.ids != sampler.ids:
            raise ArgumentError(
                describe(
                    "The miner's ids are not the ones the draw is keyed by",
                    expected=f"to_keras(ids={sampler.ids!r})",
                    found=f"ids={dataset.ids!r}",
                    fix="pass the same column to hard_examples(ids=) and to_keras(ids=)",
                )
            )
        self.sampler = sampler
        self._data_epoch = dataset.epoch  # the data epoch being trained

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._data_epoch = self.dataset.epoch

    def measure(self, packed: tuple, ids: np.ndarray) -> None:
        """Records each real row's loss (the cross-entropy of its label) as its latest score."""
        ids, _, _, losses, _ = forward_margins(self.model, packed, ids, owner="HardExampleMiner")
        self.sampler.scores.record(ids, losses)

    def flush(self, trained: int) -> None:
        """Measures the trained batches; once the epoch is complete, freezes the scores for the next."""
        super().flush(trained)
        if self.dataset.epoch > self._data_epoch:  # the adapter moved on: the epoch was served in full
            self.sampler.scores.freeze(self.dataset.epoch, rows_exchange(jax_gather()))  # every process's rows

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self.flush(2**62)  # every batch kept: all of them were trained
