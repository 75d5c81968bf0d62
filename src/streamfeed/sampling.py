"""Class weights and balanced sampling from a label distribution.

Both take their class counts from a statistics pass (``streamfeed.stats``),
so nothing here scans the data.

**Class weights** use scikit-learn's "balanced" formula,
``n / (k * count[c])``: every class contributes the same total weight.
Give them to ``model.fit(class_weight=...)`` or, per row, as a sample
weight column (:func:`with_class_weights`).

**Balanced sampling** (``Dataset.balance``) draws rows so that classes
appear in target proportions, with replacement: rare classes are
oversampled, common ones undersampled. It works per read unit (a shuffle
window): unit ``u`` of the epoch emits exactly ``k_u`` rows, drawn with
probabilities proportional to ``target[c] / count[c]``, where ``k_u`` is
the unit's share of ``samples_per_epoch`` (largest remainder, so the shares
sum exactly). Hence

- memory is one unit's draw (``k_u`` indices), never a per-row index list
  of the whole dataset (the ``[i] * weight`` pattern);
- the epoch length is ``samples_per_epoch``, known before the epoch;
- a unit's draw is a pure function of ``(seed, epoch, shard, unit)``, so a
  saved ``Position(unit, offset)`` resumes exactly.

The proportions are met in expectation when a unit's class mix resembles
the data's (the seeded fragment order and windows of many fragments make
that likely); a unit without any row of a class cannot emit it, so with
data sorted by class use a large ``window``. ``sampling_report()`` gives the
proportions actually drawn.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Sequence

import numpy as np

from .core import Chunk
from .errors import ArgumentError, DataError, SchemaError, describe
from .plan import epoch_rng

_SAMPLE_STREAM = 2  # independent of the fragment order (0) and row permutation (1) streams
_PACKED_LABEL = "__y__:"  # keras.packing.Y: the name a label has once packed for Keras


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def label_counts(stats: Any, label: str | None = None) -> dict[Any, int]:
    """Rows per class, from ``stats.label_counts`` or a column's vocabulary."""
    if label is None or label == getattr(stats, "label", None):
        counts = getattr(stats, "label_counts", None)
        if counts:
            return {_plain(k): int(v) for k, v in counts.items()}
        if label is None:
            raise SchemaError(
                describe(
                    "The stats have no label distribution",
                    fix="compute the stats with label=..., or pass label= naming a categorical column",
                )
            )
    column = stats[label]
    if not getattr(column, "vocabulary_exact", True):
        raise SchemaError(
            describe(
                f"The vocabulary of {label!r} is approximate: class counts would be estimates",
                fix="compute the stats with label=... or a larger max_vocabulary",
            )
        )
    return {_plain(value): int(count) for value, count in column.vocabulary}


def class_weights(stats: Any, *, label: str | None = None) -> dict[Any, float]:
    """``{class: n / (k * count)}`` over the ``k`` classes present in the stats.

    Integer classes can be passed straight to ``model.fit(class_weight=...)``;
    Keras requires class indices ``0..k-1`` there.
    """
    counts = {value: count for value, count in label_counts(stats, label).items() if count > 0}
    total, classes = sum(counts.values()), len(counts)
    return {value: total / (classes * count) for value, count in counts.items()}


class _ClassTable:
    """Sorted class values and a value per class, looked up with searchsorted."""

    def __init__(self, mapping: Mapping[Any, float]) -> None:
        keys = list(mapping)
        text = all(isinstance(k, (str, bytes)) for k in keys)
        values = np.array([k.decode() if isinstance(k, bytes) else k for k in keys], dtype=str if text else None)
        order = np.argsort(values, kind="stable")
        self.keys = values[order]
        self.values = np.array([mapping[keys[i]] for i in order], dtype=np.float64)

    def lookup(self, column: np.ndarray, name: str) -> np.ndarray:
        column = np.asarray(column)
        if self.keys.dtype.kind == "U" and column.dtype.kind != "U":
            column = np.char.decode(column.astype("S"), "utf-8") if column.dtype.kind == "S" else column.astype(str)
        positions = np.minimum(np.searchsorted(self.keys, column), len(self.keys) - 1)
        unknown = self.keys[positions] != column
        if unknown.any():
            raise DataError(
                describe(
                    f"Label column {name!r} holds classes the stats never saw",
                    expected=f"one of {self.keys.tolist()[:20]}",
                    found=f"{np.unique(column[unknown]).tolist()[:10]}",
                    fix="recompute the stats: the data changed since they were computed",
                )
            )
        return self.values[positions]


def with_class_weights(
    stats: Any, label: str, weight_column: str = "weight", *, weights: Mapping[Any, float] | None = None
):
    """A map function adding ``weight_column`` = the class weight of each row's label.

    Use before ``batch``, then ``to_keras(label=..., sample_weight=weight_column)``;
    this works wherever Keras takes sample weights, whatever the input type.
    """
    table = _ClassTable(weights if weights is not None else class_weights(stats, label=label))

    def add_weights(chunk: Chunk) -> Chunk:
        return {**chunk, weight_column: table.lookup(chunk[label], label).astype(np.float32)}

    add_weights.new_columns = (weight_column,)  # type: ignore[attr-defined]
    return add_weights


def largest_remainder(total: int, sizes: Sequence[int]) -> list[int]:
    """Splits ``total`` over parts proportionally to ``sizes``, summing exactly to ``total``."""
    weights = np.asarray(sizes, dtype=np.float64)
    if len(weights) == 0 or weights.sum() <= 0:
        return [0] * len(weights)
    exact = total * weights / weights.sum()
    shares = np.floor(exact).astype(np.int64)
    left = int(total - shares.sum())
    if left:
        order = np.argsort(-(exact - shares), kind="stable")  # ties: earlier part first
        shares[order[:left]] += 1
    return shares.tolist()


def draw_with_replacement(weights: np.ndarray, samples: int, rng: np.random.Generator) -> np.ndarray:
    """``samples`` indices into ``weights``, each drawn with probability ``weight / sum`` (inverse CDF)."""
    cumulative = np.cumsum(weights)
    drawn = np.searchsorted(cumulative, rng.random(samples) * cumulative[-1], side="right")
    return np.minimum(drawn, len(weights) - 1)


@dataclass(frozen=True, eq=False)
class BalancedSampler:
    """The settings of a balanced draw, and the tally of what it drew.

    Immutable settings (in the pipeline's fingerprint); the tally is the one
    mutable part, shared by every Dataset derived from the one that was
    balanced so that ``sampling_report()`` works on any of them.
    """

    label: str
    targets: Mapping[Any, float]  # class -> target proportion (sum 1)
    counts: Mapping[Any, int]  # class -> rows in the data
    samples_per_epoch: int | None
    seed: int
    _tally: dict = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _table: "_ClassTable" = field(init=False, repr=False)

    def __post_init__(self) -> None:
        probabilities = {c: (self.targets.get(c, 0.0) / n if n else 0.0) for c, n in self.counts.items()}
        object.__setattr__(self, "_table", _ClassTable(probabilities))

    def settings(self) -> dict:
        """JSON-able settings for the fingerprint."""
        return {
            "label": self.label,
            "targets": {
                str(k): round(float(v), 12) for k, v in sorted(self.targets.items(), key=lambda kv: str(kv[0]))
            },
            "counts": {str(k): int(v) for k, v in sorted(self.counts.items(), key=lambda kv: str(kv[0]))},
            "samples_per_epoch": self.samples_per_epoch,
            "seed": self.seed,
        }

    def unit_samples(self, unit_rows: Sequence[int]) -> list[int]:
        """Rows each unit emits: its share of the epoch's samples."""
        total = sum(unit_rows) if self.samples_per_epoch is None else self.samples_per_epoch
        return largest_remainder(total, unit_rows)

    def draw_column(self, chunk: Chunk) -> np.ndarray:
        """The column a unit's draw is weighted by: the label."""
        for name in (self.label, _PACKED_LABEL + self.label):
            if name in chunk:
                return chunk[name]
        raise SchemaError(
            describe(
                f"balance() needs the label column {self.label!r}, which the read unit does not have",
                found=f"columns {sorted(chunk)}",
                fix=f"keep {self.label!r} through map(), and pass label={self.label!r} to to_keras()",
            )
        )

    def draw(self, labels: np.ndarray, samples: int, *, epoch: int, shard_index: int, unit_index: int) -> np.ndarray:
        """``samples`` row indices into the unit, drawn with replacement."""
        if samples == 0:
            return np.empty(0, dtype=np.int64)
        weights = self._table.lookup(labels, self.label)
        mass = weights.sum()
        if not mass > 0:
            raise DataError(
                describe(
                    "A read unit holds no row of any class with a target proportion above 0",
                    where=f"epoch {epoch}, unit {unit_index}",
                    expected=f"rows of {[k for k, v in self.targets.items() if v > 0]}",
                    found=f"only {np.unique(labels).tolist()[:10]}",
                    fix="use a larger shuffle window (shuffle(window=...)) so units mix classes",
                )
            )
        return draw_with_replacement(
            weights, samples, epoch_rng(self.seed, epoch, _SAMPLE_STREAM, shard_index, unit_index)
        )

    def reset(self, epoch: int) -> None:
        """Forgets the tally of ``epoch`` (it is being produced from its start again)."""
        with self._lock:
            self._tally.pop(epoch, None)

    def record(self, epoch: int, column: np.ndarray, drawn: np.ndarray) -> None:
        """Counts the classes of rows actually emitted in ``epoch`` (``column[drawn]``)."""
        values, counts = np.unique(column[drawn], return_counts=True)
        with self._lock:
            tally = self._tally.setdefault(epoch, {})
            for value, count in zip(values.tolist(), counts.tolist()):
                key = value.decode() if isinstance(value, bytes) else value
                tally[key] = tally.get(key, 0) + int(count)

    def report(self, epoch: int | None = None) -> dict:
        """Realised proportions of ``epoch`` (the latest one drawn by default)."""
        with self._lock:
            if not self._tally:
                return {"epoch": None, "samples": 0, "counts": {}, "realised": {}, "target": dict(self.targets)}
            epoch = max(self._tally) if epoch is None else epoch
            counts = dict(self._tally.get(epoch, {}))
        total = sum(counts.values())
        source_total = sum(self.counts.values())
        return {
            "epoch": epoch,
            "samples": total,
            "counts": counts,
            "realised": {k: v / total for k, v in counts.items()} if total else {},
            "target": dict(self.targets),
            "source": {k: v / source_total for k, v in self.counts.items()} if source_total else {},
        }


def make_sampler(
    stats: Any,
    label: str,
    *,
    proportions: Literal["uniform"] | Mapping[Any, float] = "uniform",
    samples_per_epoch: int | None = None,
    seed: int,
) -> BalancedSampler:
    """Validates the targets against the stats' classes; see ``Dataset.balance``."""
    counts = label_counts(stats, label)
    present = [c for c, n in counts.items() if n > 0]
    if isinstance(proportions, str):
        if proportions != "uniform":
            raise ArgumentError(
                describe("Invalid proportions", expected="'uniform' or a dict", found=f"{proportions!r}")
            )
        wanted = dict.fromkeys(present, 1.0)
    else:
        wanted = {_plain(k): float(v) for k, v in proportions.items()}
    missing = [c for c, v in wanted.items() if v > 0 and counts.get(c, 0) == 0]
    if missing or any(v < 0 for v in wanted.values()) or sum(wanted.values()) <= 0:
        raise ArgumentError(
            describe(
                "Target proportions must be >= 0, not all 0, and name classes that occur",
                expected=f"classes among {present}",
                found=f"{dict(wanted)}" + (f"; absent from the data: {missing}" if missing else ""),
            )
        )
    mass = sum(wanted.values())
    targets = {c: wanted.get(c, 0.0) / mass for c in counts}
    if samples_per_epoch is not None and samples_per_epoch < 1:
        raise ArgumentError(describe("Invalid samples_per_epoch", expected=">= 1", found=f"{samples_per_epoch}"))
    return BalancedSampler(
        label, targets, counts, None if samples_per_epoch is None else int(samples_per_epoch), int(seed)
    )
