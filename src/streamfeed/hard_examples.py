"""Hard-example sampling: each epoch draws rows by how badly the model did on them before.

``Dataset.hard_examples(ids=..., rule=..., floor=...)`` replaces an
epoch's rows by a seeded draw per read unit, as ``balance()`` does
(:mod:`.sampling`): unit ``u`` emits exactly its largest-remainder share
``k_u`` of ``samples_per_epoch``, so the epoch length is known before the
first batch and a ``Position`` resumes it. The weights come from each
row's *score*, its training loss (module doc: Scores), which
:class:`streamfeed.keras.HardExampleMiner` measures during ``fit`` (one
forward pass per trained batch) and writes to the sampler's
:class:`RowScores`.

**Which scores an epoch uses.** Epoch ``e`` is drawn from the table
*frozen for it*: the scores as they stood when epoch ``e - 1`` had
finished training (the miner freezes it then), never from scores still
being written. The draw is then a pure function of (seed, epoch, unit,
that table), whatever the threads, the timing or the read-ahead; so the
Keras adapter does not start reading a hard-example epoch before the one
before it has ended (it does for other datasets). Epoch 0, and any epoch
before a table was frozen, is uniform.

**Scores.** A row's loss ``l`` is its highest loss in an epoch (a row
drawn twice may be trained by two processes: the highest does not depend
on which, or in which order), blended into its older one when the epoch's
table is frozen: ``l = smoothing * older + (1 - smoothing) * highest`` (an
exponential moving average over epochs; ``smoothing=0``: the epoch's
alone). Why: with the epoch's loss alone, rows drawn often were memorised, dropped from the next draw,
forgotten and drawn again, and the hard accuracy swung between epochs
(``benchmarks/hard_examples.py``, module doc of the benchmark for the
figures).

**Weights.** A rule turns a row's loss ``l`` into a score ``s``:

- ``"loss"``: ``s = max(l, 0)``, proportional to the loss;
- ``"quantile"``: ``s = 1`` for rows whose loss is at or above the
  ``quantile`` of the frozen table's losses, ``0`` for the others;
- ``"temperature"``: ``s = exp((l - max l) / temperature)``: a softmax of
  the losses, flatter for a higher temperature.

A row never measured (not drawn yet, or beyond ``max_rows``) takes the
table's mean score, so it is neither favoured nor starved. Within a unit
of ``n_u`` rows, row ``i`` gets the weight ``w_i = floor + (1 - floor) *
s_i / mean(s)``, whose mean over the unit is 1, so its expected draws in
the epoch are ``e_i = k_u * w_i / n_u``: **at least ``floor`` times what a
uniform draw gives it** (``k_u / n_u``, 1 when ``samples_per_epoch`` is the
row count). The draw is systematic (:func:`systematic_draw`), not
independent: each row is drawn ``floor(e_i)`` or ``ceil(e_i)`` times, so
with ``e_i < 1`` it is drawn with probability exactly ``e_i``, never
starved by chance, and an epoch without scores (epoch 0) serves every row
once, as a plain shuffle. A unit whose scores are all 0 is drawn
uniformly. The weighting is per unit, as ``balance()``'s is: a shuffle
window of many fragments makes a unit a fair sample of the data.

**Memory.** The table is keyed by a 64-bit hash of the id
(:func:`.row_ids.row_hashes`), not by the id: 16 bytes a row (hash and
loss) in sorted arrays, looked up with ``searchsorted``, plus the
measurements of the running epoch (16 bytes each) until they are merged
in when it is frozen. With ``max_rows`` it keeps the rows with the
``max_rows`` smallest hashes: a uniform sample of ids that is the same in
every epoch and after a resume. Two ids whose hashes collide share a
score (about ``n^2 / 2^65``: 3e-8 for a million rows). The state holds
the table as two lists (about 40 bytes a row in JSON).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping, Sequence

import numpy as np

from .core import Chunk
from .errors import ArgumentError, SchemaError, StateError, describe
from .plan import epoch_rng
from .row_ids import refuse_nan_ids, row_hashes
from .sampling import largest_remainder

Rule = Literal["loss", "quantile", "temperature"]
Exchange = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
"""Every training process's ``(hashes, losses)``, concatenated in process order, on every process."""
RULES: tuple[str, ...] = ("loss", "quantile", "temperature")
_HARD_STREAM = 3  # independent of the fragment order (0), row permutation (1) and balance's draw (2)
_PACKED_IDS = "__ids__"  # keras.packing.IDS: the name the ids have once packed for Keras
_KEPT_TABLES = 2  # frozen tables kept: the epoch being drawn and the one before it


@dataclass(frozen=True)
class FrozenScores:
    """The scores one epoch is drawn from: sorted id hashes and each one's score (its smoothed loss)."""

    epoch: int
    hashes: np.ndarray  # uint64, sorted, unique
    losses: np.ndarray  # float64, aligned with hashes

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """Each id's loss, NaN for an id not in the table."""
        hashes = row_hashes(ids)
        if len(self.hashes) == 0:
            return np.full(len(hashes), np.nan)
        at = np.minimum(np.searchsorted(self.hashes, hashes), len(self.hashes) - 1)
        return np.where(self.hashes[at] == hashes, self.losses[at], np.nan)


class RowScores:
    """Per-row losses measured in training: merged into a frozen table per epoch, for that epoch's draw.

    ``record`` (the miner, on Keras's thread) appends measurements;
    ``freeze(e)`` merges them into a new table for epoch ``e`` (a row's
    highest measurement of the epoch, smoothed into its older score) and starts collecting afresh; the draw
    (the read threads) reads frozen tables only, which never change.
    """

    def __init__(self, max_rows: int | None, smoothing: float = 0.0) -> None:
        self.max_rows, self.smoothing = max_rows, float(smoothing)
        self._lock = threading.Lock()
        self._frozen: list[FrozenScores] = []  # ascending epochs; at most _KEPT_TABLES
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []  # (hashes, losses) since the last freeze
        self._pending_rows = 0
        self._cut = np.uint64(2**64 - 1)  # hashes above it cannot enter a full table
        self._first: int | None = None  # the first epoch drawn from a table: those before are uniform

    def record(self, ids: np.ndarray, losses: np.ndarray) -> None:
        """Notes each row's loss at a training step (rows beyond ``max_rows`` are not kept)."""
        ids = np.asarray(ids)
        refuse_nan_ids(ids)
        hashes = row_hashes(ids)
        losses = np.asarray(losses, dtype=np.float64).reshape(len(hashes))
        keep = hashes <= self._cut
        with self._lock:
            self._pending.append((hashes[keep], losses[keep]))
            self._pending_rows += int(np.count_nonzero(keep))
            if self.max_rows is not None and self._pending_rows > 2 * self.max_rows:
                self._compact()

    def _compact(self) -> None:
        """Keeps of the pending measurements each row's highest, of the ``max_rows`` smallest hashes only.

        No other can be in the next table: ``max_rows`` pending rows hash below it. So the pending part
        stays within ``2 * max_rows`` measurements, and the next table is what it would have been.
        """
        unique, kept = _highest(self._pending)
        unique, kept = unique[: self.max_rows], kept[: self.max_rows]
        if self.max_rows is not None and len(unique) == self.max_rows:
            self._cut = min(self._cut, unique[-1])
        self._pending, self._pending_rows = [(unique, kept)], len(unique)

    def freeze(self, epoch: int, exchange: Exchange | None = None) -> FrozenScores:
        """The table epoch ``epoch`` is drawn from: the latest table with every measurement since merged in.

        ``exchange``: in a job of several training processes, every process's
        measurements (each measured the rows it trained). Idempotent: a table
        already frozen for ``epoch`` is returned as it is.
        """
        with self._lock:
            if self._frozen and self._frozen[-1].epoch >= epoch:
                if self._frozen[-1].epoch == epoch:
                    return self._frozen[-1]
                raise StateError(describe(f"Scores for epoch {epoch} asked after epoch {self._frozen[-1].epoch}'s"))
        measured = self._measured(exchange)  # a collective: outside the lock
        with self._lock:
            base = self._frozen[-1] if self._frozen else FrozenScores(-1, np.empty(0, np.uint64), np.empty(0))
            unique, kept = _smoothed(base, *measured, self.smoothing)
            if self.max_rows is not None and len(unique) > self.max_rows:
                unique, kept = unique[: self.max_rows], kept[: self.max_rows]  # sorted: the smallest hashes
                self._cut = unique[-1]
            table = FrozenScores(int(epoch), unique, kept)
            self._first = int(epoch) if self._first is None else self._first
            self._frozen = [*self._frozen, table][-_KEPT_TABLES:]
            self._pending, self._pending_rows = [], 0
            return table

    def _measured(self, exchange: Exchange | None) -> tuple[np.ndarray, np.ndarray]:
        """The measurements not merged yet, each row's highest; of every process with ``exchange``."""
        with self._lock:
            hashes, losses = _highest(self._pending)
        return _highest([exchange(hashes, losses)]) if exchange is not None else (hashes, losses)

    def for_epoch(self, epoch: int) -> FrozenScores | None:
        """The table epoch ``epoch`` is drawn from (the latest frozen for it or before); None: uniform."""
        with self._lock:
            tables = [t for t in self._frozen if t.epoch <= epoch]
            if not tables and self._first is not None and epoch >= self._first:
                raise StateError(
                    describe(
                        f"The scores epoch {epoch} was drawn from are no longer kept",
                        expected=f"an epoch from {self._frozen[0].epoch} on",
                        fix="restore the state saved with that epoch (it holds its scores)",
                    )
                )
            return tables[-1] if tables else None

    # ------------------------------------------------------------ state
    def state(self, epoch: int, exchange: Exchange | None = None) -> dict:
        """JSON-able: the table epoch ``epoch`` is drawn from and the measurements not merged yet.

        ``exchange``: of every training process, so that the one state saved holds all of them.
        """
        table = self.for_epoch(epoch)
        hashes, losses = self._measured(exchange)
        return {
            "max_rows": self.max_rows,
            "smoothing": self.smoothing,
            "cut": int(self._cut),
            "table": None if table is None else _table_state(table),
            "pending": {"hashes": hashes.tolist(), "losses": losses.tolist()},
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        """Puts back what :meth:`state` saved; refused naming the field if it is not such a state."""
        try:
            for name in ("max_rows", "smoothing"):
                if state[name] != getattr(self, name):
                    raise StateError(
                        describe(
                            f"The saved scores were kept under another {name}",
                            expected=str(getattr(self, name)),
                            found=str(state[name]),
                            fix=f"resume with the hard_examples({name}=) the state was saved with",
                        )
                    )
            table = state["table"]
            frozen = [] if table is None else [_table_from(table)]
            pending = state["pending"]
            hashes = np.asarray(pending["hashes"], dtype=np.uint64)
            losses = np.asarray(pending["losses"], dtype=np.float64)
            cut = np.uint64(int(state["cut"]))
        except (KeyError, TypeError, ValueError, OverflowError) as error:
            raise StateError(
                describe(
                    "The saved hard-example scores are malformed",
                    expected="the 'row_scores' a KerasDataset's get_state() wrote",
                    found=f"{type(error).__name__}: {error}",
                )
            ) from None
        if len(hashes) != len(losses):
            raise StateError(describe("The saved pending scores do not pair up", found=f"{len(hashes)} hashes"))
        with self._lock:
            self._frozen, self._pending, self._cut = frozen, [(hashes, losses)] if len(hashes) else [], cut
            self._pending_rows = len(hashes)
            self._first = None if table is None else 0  # the tables before the saved one are not in the state

    def summary(self, epoch: int) -> dict:
        """The score distribution epoch ``epoch`` is drawn from: rows scored and loss quantiles."""
        table = self.for_epoch(epoch)
        losses = table.losses if table is not None else np.empty(0)
        quantiles = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0)
        return {
            "table_epoch": None if table is None else table.epoch,
            "rows_scored": len(losses),
            "loss_quantiles": {str(q): float(np.quantile(losses, q)) for q in quantiles} if len(losses) else {},
        }


def _highest(parts: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique hashes of ``(hashes, losses)`` parts, each with its highest loss.

    The highest, not the latest: it does not depend on the order of the
    measurements, so it is the same whichever training process measured a
    row drawn twice, and taking it again over a part already reduced (a
    compaction, a restored state, a union of processes) changes nothing.
    """
    hashes = np.concatenate([p[0] for p in parts]) if parts else np.empty(0, np.uint64)
    losses = np.concatenate([p[1] for p in parts]) if parts else np.empty(0)
    if len(hashes) == 0:
        return hashes.astype(np.uint64), losses.astype(np.float64)
    order = np.lexsort((losses, hashes))  # by hash, then loss: each hash's last is its highest
    hashes, losses = hashes[order], losses[order]
    last = np.flatnonzero(np.r_[hashes[1:] != hashes[:-1], True])
    return hashes[last], losses[last]


def _smoothed(
    base: FrozenScores, hashes: np.ndarray, losses: np.ndarray, smoothing: float
) -> tuple[np.ndarray, np.ndarray]:
    """The next table: ``base`` with the epoch's losses blended in, ``smoothing * old + (1 - smoothing) * new``.

    A row not measured in the epoch keeps its score; a row new to the table takes its loss.
    """
    unique = np.union1d(base.hashes, hashes)
    kept = np.zeros(len(unique))
    kept[np.searchsorted(unique, base.hashes)] = base.losses
    at = np.searchsorted(unique, hashes)
    known = np.isin(hashes, base.hashes, assume_unique=True)
    kept[at] = np.where(known, smoothing * kept[at] + (1.0 - smoothing) * losses, losses)
    return unique, kept


def _table_state(table: FrozenScores) -> dict:
    return {"epoch": table.epoch, "hashes": table.hashes.tolist(), "losses": table.losses.tolist()}


def _table_from(state: Mapping[str, Any]) -> FrozenScores:
    hashes = np.asarray(state["hashes"], dtype=np.uint64)
    losses = np.asarray(state["losses"], dtype=np.float64)
    if len(hashes) != len(losses) or (len(hashes) > 1 and not bool(np.all(hashes[1:] > hashes[:-1]))):
        raise StateError(
            describe(
                "The saved hard-example scores are malformed",
                expected="a table of sorted, unique hashes, one loss each",
                found=f"{len(hashes)} hashes, {len(losses)} losses",
            )
        )
    return FrozenScores(int(state["epoch"]), hashes, losses)


@dataclass(frozen=True, eq=False)
class HardExampleSampler:
    """The settings of a hard-example draw (in the pipeline's fingerprint), its scores and the tally.

    The scores and the tally are the mutable parts, shared by every
    Dataset derived from the one that was given ``hard_examples()``.
    """

    ids: str
    rule: Rule
    floor: float
    quantile: float
    temperature: float
    samples_per_epoch: int | None
    seed: int
    scores: RowScores
    _tally: dict = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _rule_cache: list = field(default_factory=list, repr=False)  # [table, its rule figures]: see _rule_of

    def settings(self) -> dict:
        """JSON-able settings for the fingerprint: every field but the scores and the tally."""
        return {
            "kind": "hard_examples",
            "ids": self.ids,
            "rule": self.rule,
            "floor": self.floor,
            "quantile": self.quantile,
            "temperature": self.temperature,
            "samples_per_epoch": self.samples_per_epoch,
            "seed": self.seed,
            "max_rows": self.scores.max_rows,
            "smoothing": self.scores.smoothing,
        }

    def unit_samples(self, unit_rows: Sequence[int]) -> list[int]:
        """Rows each unit emits: its share of the epoch's samples."""
        total = sum(unit_rows) if self.samples_per_epoch is None else self.samples_per_epoch
        return largest_remainder(total, unit_rows)

    def draw_column(self, chunk: Chunk) -> np.ndarray:
        """The column a unit's draw is weighted by: the ids the scores are keyed by."""
        for name in (self.ids, _PACKED_IDS):
            if name in chunk:
                return chunk[name]
        raise SchemaError(
            describe(
                f"hard_examples() needs the id column {self.ids!r}, which the read unit does not have",
                found=f"columns {sorted(chunk)}",
                fix=f"keep {self.ids!r} through map(), and pass ids={self.ids!r} to to_keras()",
            )
        )

    def weights(self, ids: np.ndarray, epoch: int) -> np.ndarray:
        """Each row's draw weight in its unit (mean 1; module doc): ``floor`` plus its share of the scores."""
        table = self.scores.for_epoch(epoch)
        if table is None or len(table.losses) == 0:
            return np.ones(len(ids))
        scores = self._scores(table.lookup(ids), self._rule_of(table))
        mean = scores.mean()
        if not mean > 0:
            return np.ones(len(ids))
        return self.floor + (1.0 - self.floor) * scores / mean

    def _rule_of(self, table: FrozenScores) -> tuple[float, float]:
        """The table's figures the rule needs, ``(quantile cut or top loss, mean score)``: once per table,
        not per unit (a quantile of a million losses is 20-30 ms; an epoch has tens of units)."""
        with self._lock:
            if self._rule_cache and self._rule_cache[0] is table:
                return self._rule_cache[1]
        losses = table.losses
        if self.rule == "quantile":
            level = float(np.quantile(losses, self.quantile))
            mean = float(np.mean(losses >= level))
        elif self.rule == "temperature":
            level = float(losses.max())
            mean = float(np.mean(np.exp((losses - level) / self.temperature)))
        else:
            level, mean = 0.0, float(np.mean(np.maximum(losses, 0.0)))
        with self._lock:
            self._rule_cache[:] = [table, (level, mean)]
        return level, mean

    def _scores(self, losses: np.ndarray, rule: tuple[float, float]) -> np.ndarray:
        """The rule's score per row; rows without a loss take the table's mean score."""
        level, mean = rule
        if self.rule == "loss":
            scores = np.maximum(losses, 0.0)
        elif self.rule == "quantile":
            scores = (losses >= level).astype(np.float64)
        else:
            scores = np.exp((losses - level) / self.temperature)
        return np.where(np.isnan(losses), mean, scores)

    def draw(self, ids: np.ndarray, samples: int, *, epoch: int, shard_index: int, unit_index: int) -> np.ndarray:
        """``samples`` row indices into the unit by :meth:`weights`, systematically (module doc), in a seeded order."""
        if samples == 0:
            return np.empty(0, dtype=np.int64)
        rng = epoch_rng(self.seed, epoch, _HARD_STREAM, shard_index, unit_index)
        return systematic_draw(self.weights(np.asarray(ids), epoch), samples, rng)

    def reset(self, epoch: int) -> None:
        """Forgets the tally of ``epoch`` (it is being produced from its start again)."""
        with self._lock:
            self._tally.pop(epoch, None)

    def record(self, epoch: int, column: np.ndarray, drawn: np.ndarray) -> None:
        """Counts the rows emitted in ``epoch`` and how many of them were drawn more than once in their unit."""
        repeats = len(drawn) - len(np.unique(drawn))
        with self._lock:
            tally = self._tally.setdefault(epoch, {"samples": 0, "repeats_in_unit": 0})
            tally["samples"] += len(drawn)
            tally["repeats_in_unit"] += repeats

    def report(self, epoch: int | None = None) -> dict:
        """What ``epoch`` (the latest drawn by default) drew, and the score distribution it was drawn from."""
        with self._lock:
            epoch = (max(self._tally) if self._tally else None) if epoch is None else epoch
            tally = dict(self._tally.get(epoch, {"samples": 0, "repeats_in_unit": 0})) if epoch is not None else {}
        return {
            "epoch": epoch,
            "rule": self.rule,
            "floor": self.floor,
            **tally,
            **(self.scores.summary(epoch) if epoch is not None else {}),
        }


def systematic_draw(weights: np.ndarray, samples: int, rng: np.random.Generator) -> np.ndarray:
    """``samples`` indices, index ``i`` drawn ``floor(e_i)`` or ``ceil(e_i)`` times, ``e_i = samples * w_i / sum(w)``.

    Systematic sampling (one uniform offset, then evenly spaced points on
    the cumulative weights) over a seeded permutation of the rows, so a row
    is drawn within one of its expected count and with probability
    ``e_i`` at least once when ``e_i < 1``; the draw is then put in a seeded
    order. Equal weights and ``samples == len(weights)``: every row once.
    """
    rows = len(weights)
    order = rng.permutation(rows)
    cumulative = np.cumsum(weights[order])
    points = (rng.random() + np.arange(samples)) * (cumulative[-1] / samples)
    drawn = order[np.minimum(np.searchsorted(cumulative, points, side="right"), rows - 1)]
    return drawn[rng.permutation(samples)]


def make_hard_sampler(
    *,
    ids: str,
    rule: str,
    floor: float,
    quantile: float,
    temperature: float,
    max_rows: int | None,
    smoothing: float,
    samples_per_epoch: int | None,
    seed: int,
) -> HardExampleSampler:
    """Validates the settings; see ``Dataset.hard_examples``."""
    problems = []
    if rule not in RULES:
        problems.append(("rule", f"one of {list(RULES)}", repr(rule)))
    if not 0.0 < float(floor) <= 1.0:
        problems.append(("floor", "0 < floor <= 1 (every row's minimum chance, as a share of uniform)", repr(floor)))
    if not 0.0 <= float(quantile) < 1.0:
        problems.append(("quantile", "0 <= quantile < 1", repr(quantile)))
    if not float(temperature) > 0.0:
        problems.append(("temperature", "> 0", repr(temperature)))
    if not 0.0 <= float(smoothing) < 1.0:
        problems.append(("smoothing", "0 <= smoothing < 1 (the weight of a row's older score)", repr(smoothing)))
    if max_rows is not None and max_rows < 1:
        problems.append(("max_rows", "None or >= 1", repr(max_rows)))
    if samples_per_epoch is not None and samples_per_epoch < 1:
        problems.append(("samples_per_epoch", ">= 1", repr(samples_per_epoch)))
    if problems:
        name, expected, found = problems[0]
        raise ArgumentError(describe(f"Invalid hard_examples({name}=)", expected=expected, found=found))
    return HardExampleSampler(
        ids,
        rule,  # type: ignore[arg-type]  # checked against RULES above
        float(floor),
        float(quantile),
        float(temperature),
        None if samples_per_epoch is None else int(samples_per_epoch),
        int(seed),
        RowScores(max_rows, smoothing),
    )
