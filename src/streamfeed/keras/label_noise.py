"""Per-row training dynamics and the label-noise estimate drawn from them (no Keras here).

The method is the area under the margin (AUM, Pleiss et al. 2020): each
time a row is trained, its *margin* is the model's score for the row's
given label minus the largest score of any other class; a row's AUM is the
mean of its margins over training. A correctly labelled row is pushed to
a positive margin by its own gradient and by every similar row; a
mislabelled row's gradient is outvoted by its look-alikes, so its margin
stays negative until (if ever) the model memorises it. Why AUM: it is
computed from what training produces batch by batch, needs no held-out
predictions and no second pass (confident learning does), and the ranking
by AUM is what Pleiss et al. show separates flipped labels best.

Calibration. Pleiss et al. set the threshold from *threshold samples*,
rows moved to an extra fake class. A monitor cannot add a class to the
user's model, so the threshold here is the margin's own zero: a row is
misranked when the model ranks another class above the given label (zero
is the same point for logits and probabilities). Ranking (the suspects'
order) is by AUM, the mean over all of training; the noise-rate *estimate*
is the share of tracked rows misranked in each of their last
:data:`RECENT` measurements (all of them while fewer). Why not the share
below zero of the AUM itself: the AUM averages in the warm-up epochs, when
every row is misranked, so that share fell with training length alone.
On scikit-learn's digits (Dense(64), three seeds, three backends:
``benchmarks/quality_monitor.py --sections length``), clean labels: the
AUM share read 6.6–9.1 % after 5 epochs, 3.6–4.5 % after 10 and 1.2–1.7 %
after 30; the estimate 3.5–4.6 %, 1.5–2.2 % and 0.2–0.4 %. With 9–10 %
flipped, the estimate's error against the truth was +1.5 to +2.4 points
after 10 epochs (clean training accuracy 0.97), +0.4 to +1.4 after 20 and
+0.1 to +0.9 after 30 (the AUM share +1.4 to +2.1 after 30 and still
falling): once the model has fit the clean rows it stays within 1.5 points
of the truth, however much longer it trains. A clean row the model is
still unsure of, misranked one epoch in two, is not counted. Biases
that remain: clean rows the model keeps getting wrong count as noise
(upward, the clean training error), and mislabelled rows the model has
memorised are missed (downward, growing with epochs and capacity);
``docs/self-healing.md`` has the figures and the command.

Memory. Eight numbers per tracked row (64 bytes; arrays grow by doubling)
plus its id in a dict: 170 bytes a row measured with six numbers
(tracemalloc, 1 M integer ids), 16 more with the two added since, plus the
id's own size for strings. With ``max_rows`` the ledger tracks a bounded,
uniform sample of rows chosen by a hash of the id (the rows with the
smallest hashes, the cut halved whenever the sample outgrows
``max_rows``): unlike a random reservoir, the same row stays in or out in
every epoch, which a mean over epochs needs.
"""

from __future__ import annotations

from typing import Any, Hashable, Iterable

import numpy as np

from ..errors import ArgumentError, describe
from ..row_ids import FULL_HASH, plain_id, refuse_nan_ids, row_hashes

_FIELDS = ("sum_margin", "sum_loss", "last_margin", "seen", "label", "hash", "epoch", "misranked_run")
# epoch: the last one a row was seen in; misranked_run: its latest measurements in a row below the threshold
RECENT = 3  # a row counts as mislabelled when misranked in each of its last RECENT measurements (module doc)


def margins_and_losses(outputs: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's margin (given label's score minus the largest other) and its cross-entropy.

    ``outputs``: ``(rows, classes)`` logits or probabilities, or ``(rows,)``/``(rows, 1)``
    for a binary model (a logit, or a probability, which is turned into one).
    ``labels``: class ids ``(rows,)`` or one-hot ``(rows, classes)``.
    """
    scores = np.asarray(outputs, dtype=np.float64)
    scores = scores.reshape(len(scores), -1)
    if not np.isfinite(scores).all():  # a NaN margin is never below the threshold: it would read as a clean row
        raise ArgumentError(
            describe(
                "The model's outputs hold NaN or infinite values: no margin can be measured",
                expected="finite logits or probabilities",
                found=f"{int(np.count_nonzero(~np.isfinite(scores).all(axis=1)))} of {len(scores)} rows non-finite",
                fix="the model diverged: lower the learning rate or clip gradients (keras.callbacks.TerminateOnNaN)",
            )
        )
    given = class_ids(labels)
    rows = np.arange(len(scores))
    is_probability = bool(scores.size) and scores.min() >= 0.0 and scores.max() <= 1.0
    classes = max(scores.shape[1], 2)  # one output: a binary model, labels 0 and 1
    if given.min(initial=0) < 0 or given.max(initial=0) >= classes:
        raise ArgumentError(
            describe(
                "A label is not a class of the model's output",
                expected=f"labels in 0..{classes - 1}",
                found=f"labels from {given.min()} to {given.max()}",
                fix="check label= against the model's last layer",
            )
        )
    if scores.shape[1] == 1:
        score = scores[:, 0]
        if is_probability:
            clipped = np.clip(score, 1e-7, 1 - 1e-7)
            score = np.log(clipped) - np.log1p(-clipped)
        margin = np.where(given == 1, score, -score)
        return margin, np.logaddexp(0.0, -margin)
    # Reductions run over classes, so the (classes, rows) copy: for few classes numpy reduces a short
    # inner axis 10x slower than a long one (measured: 65 vs 5 us for the max of 1024 x 4).
    columns = np.ascontiguousarray(scores.T)
    mine = scores[rows, given]
    others = columns.copy()
    others[given, rows] = -np.inf
    margin = mine - others.max(axis=0)
    is_probability = is_probability and bool(np.abs(columns.sum(axis=0) - 1.0).max() <= 1e-3)
    if is_probability:
        loss = -np.log(np.clip(mine, 1e-7, 1.0))
    else:
        top = columns.max(axis=0)
        loss = top + np.log(np.exp(columns - top).sum(axis=0)) - mine
    return margin, loss


def class_ids(labels: np.ndarray) -> np.ndarray:
    """Labels as int64 class ids: one-hot (or soft) rows by their largest entry, floats only if whole numbers.

    A float label such as 1.7 (a regression target, or a wrong column) is
    refused rather than truncated to class 1.
    """
    labels = np.asarray(labels)
    if labels.ndim == 2 and labels.shape[1] > 1:
        return np.asarray(labels.argmax(axis=1), dtype=np.int64)
    labels = labels.reshape(len(labels))
    if labels.dtype.kind == "f":
        bad = ~np.isfinite(labels) | (labels != np.round(labels))
        if bad.any():
            raise ArgumentError(
                describe(
                    "Labels are not class ids",
                    expected="whole-number class ids (or one-hot rows)",
                    found=f"{int(np.count_nonzero(bad))} of {len(labels)} labels such as {labels[bad][0]!r}",
                    fix="pass the class-id column as label=, or round it to classes first with .map",
                )
            )
    elif labels.dtype.kind not in "iub":
        raise ArgumentError(
            describe(
                "Labels are not class ids",
                expected="integer class ids (or one-hot rows)",
                found=f"labels of dtype {labels.dtype}",
                fix="pass the class-id column as label=",
            )
        )
    return labels.astype(np.int64)


class MarginLedger:
    """Per-row sums of margins and losses, a noise-rate estimate and the ranked suspects.

    Args:
        max_rows: track at most this many rows (a uniform sample by id hash);
            ``None`` tracks every row.
        threshold: the AUM below which a row is a suspect (see the module).
    """

    def __init__(self, *, max_rows: int | None = None, threshold: float = 0.0) -> None:
        if max_rows is not None and max_rows < 1:
            raise ArgumentError(describe("max_rows must be positive", found=str(max_rows), fix="pass None or >= 1"))
        self.max_rows, self.threshold = max_rows, float(threshold)
        self._cut = FULL_HASH  # rows whose id hash is <= the cut are tracked
        self._epoch = 1.0  # rows seen in this epoch carry it: a second sighting is a colliding id
        self._slots: dict[Hashable, int] = {}
        self._ids: list[Any] = []
        self._data = {name: np.zeros(1024, dtype=np.uint64 if name == "hash" else np.float64) for name in _FIELDS}

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def sampled_share(self) -> float:
        """The share of all rows this ledger tracks (1.0 unless ``max_rows`` was reached)."""
        return 1.0 if self._cut == FULL_HASH else float(self._cut) / float(FULL_HASH)

    def begin_epoch(self) -> None:
        """Starts a new epoch: each tracked row may be trained once more."""
        self._epoch += 1.0

    def add(self, ids: np.ndarray, labels: np.ndarray, margins: np.ndarray, losses: np.ndarray) -> None:
        """Records one trained batch: one margin and loss per row.

        Refused, before anything is recorded: NaN ids (NaN equals nothing,
        so each would be a new row every epoch) and an id trained twice in
        one epoch (two rows sharing an id would be merged into one AUM).
        """
        ids = np.asarray(ids)
        labels = class_ids(labels)
        refuse_nan_ids(ids)
        hashes = row_hashes(ids) if self.max_rows is not None else np.zeros(len(ids), dtype=np.uint64)
        keep = hashes <= self._cut
        keys = ids[keep].tolist()
        found = list(map(self._slots.get, keys))  # one C-level pass; rows seen before are most of them
        seen = np.asarray([slot for slot in found if slot is not None], dtype=np.int64)
        again = seen[self._data["epoch"][seen] == self._epoch]
        if len(again) or len(set(keys)) < len(keys):
            twice = self._ids[int(again[0])] if len(again) else next(k for k in keys if keys.count(k) > 1)
            raise ArgumentError(
                describe(
                    "The row ids are not unique: an id was trained twice in one epoch",
                    where="the batches trained in one epoch",
                    expected="one id per row (ids= names a column unique per row)",
                    found=f"id {plain_id(twice)!r} again",
                    fix="pass a unique column as ids= (for image folders, ids='path'); two rows would share one AUM",
                )
            )
        if None in found:
            found = [self._slot(key, h) if slot is None else slot for key, h, slot in zip(keys, hashes[keep], found)]
        slots = np.asarray(found, dtype=np.int64)
        data = self._data
        np.add.at(data["sum_margin"], slots, margins[keep])
        np.add.at(data["sum_loss"], slots, losses[keep])
        np.add.at(data["seen"], slots, 1.0)
        data["last_margin"][slots] = margins[keep]
        data["misranked_run"][slots] = np.where(margins[keep] < self.threshold, data["misranked_run"][slots] + 1, 0)
        data["label"][slots] = labels[keep]
        data["epoch"][slots] = self._epoch
        if self.max_rows is not None and len(self._ids) > self.max_rows:
            self._shrink()

    def _slot(self, key: Hashable, hash_value: np.uint64) -> int:
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = len(self._ids)
            self._ids.append(key)
            if slot == len(self._data["seen"]):
                self._data = {name: np.concatenate([v, np.zeros_like(v)]) for name, v in self._data.items()}
            self._data["hash"][slot] = hash_value
        return slot

    def _shrink(self) -> None:
        """Halves the hash cut until at most ``max_rows`` rows remain, dropping the others."""
        count = len(self._ids)
        hashes = self._data["hash"][:count]
        while int(np.count_nonzero(hashes <= self._cut)) > (self.max_rows or 0):
            self._cut = np.uint64(self._cut // np.uint64(2))
        keep = np.flatnonzero(hashes <= self._cut)
        self._ids = [self._ids[i] for i in keep.tolist()]
        self._slots = {key: slot for slot, key in enumerate(self._ids)}
        self._data = {
            name: np.concatenate([v[keep], np.zeros_like(v[: len(v) - len(keep)])]) for name, v in self._data.items()
        }

    def mean_margins(self) -> np.ndarray:
        """Each tracked row's AUM, in the order rows were first seen."""
        count = len(self._ids)
        return self._data["sum_margin"][:count] / np.maximum(self._data["seen"][:count], 1.0)

    def misranked(self) -> np.ndarray:
        """Whether each tracked row was below the threshold in each of its last :data:`RECENT` measurements."""
        count = len(self._ids)
        data = self._data
        return data["misranked_run"][:count] >= np.minimum(data["seen"][:count], RECENT)

    def noise_rate(self) -> float:
        """The estimated share of mislabelled rows: tracked rows misranked in each of their last measurements."""
        return float(np.mean(self.misranked())) if self._ids else 0.0

    def suspects(self, top: int | None = None) -> list[dict[str, Any]]:
        """Rows by ascending AUM with their evidence: the rows the estimate counts, or the ``top`` lowest."""
        margins = self.mean_margins()
        order = np.argsort(margins, kind="stable")
        if top is None:
            order = order[self.misranked()[order]]
        else:
            order = order[:top]
        data = self._data
        return [
            {
                "id": plain_id(self._ids[slot]),
                "rank": rank + 1,
                "mean_margin": float(margins[slot]),
                "last_margin": float(data["last_margin"][slot]),
                "mean_loss": float(data["sum_loss"][slot] / max(data["seen"][slot], 1.0)),
                "times_trained": int(data["seen"][slot]),
                "label": int(data["label"][slot]),
            }
            for rank, slot in enumerate(order.tolist())
        ]

    def ids(self) -> Iterable[Any]:
        """The tracked ids, in the order they were first seen."""
        return list(self._ids)
