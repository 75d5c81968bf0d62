"""Bucketing by length: rows of similar length batched together, each batch padded to its bucket's boundary.

``Pad(length=None)`` pads each batch to its longest row: under XLA (JAX,
TensorFlow's jit) every distinct longest row is one more compiled shape
(keras#20369). A fixed ``Pad(length=L)`` gives one shape but pads a short
row to ``L``. A :class:`Bucket` sits between the two: row ``r`` goes to the
first bucket whose boundary is at least its length, a bucket emits a batch
of its own size when it is full, and its batches are padded to its
boundary, so a model sees at most ``len(boundaries)`` sequence lengths
(tf.data's ``bucket_by_sequence_length`` with ``pad_to_bucket_boundary``,
with the last boundary as the longest length served rather than an
open-ended last bucket, which would be one shape per batch again).

Rows are routed in the order the epoch serves them (shuffled or not); at
the epoch's end each bucket's short rest follows the last-batch policy
(``keep``, ``drop``, ``pad``), bucket by bucket in boundary order. Which
rows form which batch is a function of the row order and the settings
alone, never of how the rows arrived in pieces (read threads, memory
limit): :meth:`BucketBatcher.add` works out, row by row, the row that
completes each batch.

Resuming: a batch is emitted when a row completes it, and the rows still
waiting in the other buckets came before that row. The position after a
batch (:class:`BucketPosition`) is the rows routed (the row stream up to
the completing row), the rows still waiting (their numbers in the epoch's
order: fewer than the sum of the batch sizes) and the batches each bucket
has served. A resumed epoch reads from the first waiting row, routes the
waiting rows again, skips the others already served, and carries on: it
serves exactly the batches the uninterrupted epoch would have.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from ..core import Chunk, chunk_len, concat_chunks
from ..core_ragged import Ragged
from ..errors import ArgumentError, DataError, describe
from ..plan import EpochPlan
from .batch import PAD_MASK, LastBatch, num_batches, pad_batch
from .padding import Mark, Op, Pad, Truncate, pad_rows


@dataclass(frozen=True)
class Bucket:
    """How ``batch(bucket=...)`` groups rows by the length of a list column.

    ``column``: the variable-length list column whose row lengths route the
    rows. ``boundaries``: the padded lengths, strictly increasing; a row goes
    to the first bucket whose boundary is at least its length and is padded
    to that boundary. ``batch_sizes``: one batch size per boundary.
    ``truncate``: a row longer than the last boundary raises a
    :class:`~streamfeed.errors.DataError` naming it (``"error"``, the
    default), or is cut to the last boundary keeping its first (``"end"``)
    or last (``"start"``) values. ``value`` and ``mark`` are
    :class:`~streamfeed.Pad`'s: what fills the rest, and the
    ``<column>_length`` or ``<column>_mask`` column added beside it.
    """

    column: str
    boundaries: tuple[int, ...]
    batch_sizes: tuple[int, ...]
    truncate: Truncate = "error"
    value: int | float = 0
    mark: Mark = "length"

    def __post_init__(self) -> None:
        if not isinstance(self.column, str) or not self.column:
            raise ArgumentError(describe("Invalid bucket column", expected="a column name", found=repr(self.column)))
        for name in ("boundaries", "batch_sizes"):
            given = getattr(self, name)
            if isinstance(given, (str, bytes)) or not hasattr(given, "__iter__"):
                raise ArgumentError(
                    describe(f"Invalid bucket {name}", expected="a sequence of integers", found=repr(given)[:80])
                )
            values = tuple(given)
            if not values or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values):
                raise ArgumentError(
                    describe(
                        f"Invalid bucket {name}", expected="a non-empty sequence of integers >= 1", found=repr(values)
                    )
                )
            object.__setattr__(self, name, values)
        if any(a >= b for a, b in zip(self.boundaries, self.boundaries[1:])):
            raise ArgumentError(
                describe("Invalid bucket boundaries", expected="strictly increasing", found=repr(self.boundaries))
            )
        if len(self.batch_sizes) != len(self.boundaries):
            raise ArgumentError(
                describe(
                    "Every bucket needs one batch size",
                    expected=f"{len(self.boundaries)} batch sizes, one per boundary {self.boundaries}",
                    found=f"{len(self.batch_sizes)}: {self.batch_sizes}",
                    fix="give batch_sizes=(...) with as many entries as boundaries=(...)",
                )
            )
        # Pad checks truncate, mark and value, with the same messages.
        Pad(length=self.boundaries[-1], value=self.value, truncate=self.truncate, mark=self.mark)

    def identity(self) -> str:
        """Who this bucketing is in a fingerprint: every field (``dataclasses.asdict``), so none is forgotten."""
        return "streamfeed.bucket" + json.dumps(dataclasses.asdict(self), sort_keys=True)

    def bucket_of(self, lengths: np.ndarray) -> np.ndarray:
        """Each row's bucket, ``len(boundaries)`` for a row longer than the last boundary."""
        return np.searchsorted(np.asarray(self.boundaries), lengths, side="left")

    def counts(self, chunk: Chunk, where: str) -> np.ndarray:
        """Rows of ``chunk`` in each bucket (``where`` names the chunk in the error for a row too long)."""
        buckets = self.bucket_of(self.lengths(chunk, where))
        self.check_lengths(buckets, chunk, where)
        return np.bincount(np.minimum(buckets, len(self.boundaries) - 1), minlength=len(self.boundaries))

    def lengths(self, chunk: Chunk, where: str) -> np.ndarray:
        column = chunk.get(self.column)
        if not isinstance(column, Ragged):
            raise ArgumentError(
                describe(
                    f"The bucket column {self.column!r} is not a variable-length list column",
                    where=where,
                    expected="a column read as ragged rows (a Parquet list of numbers)",
                    found="no such column" if column is None else f"an array of shape {np.shape(column)}",
                    fix=f"bucket by one of {sorted(n for n, c in chunk.items() if isinstance(c, Ragged))}",
                )
            )
        return column.lengths()

    def check_lengths(self, buckets: np.ndarray, chunk: Chunk, where: str) -> None:
        """Refuses a row longer than the last boundary under ``truncate="error"``, naming it."""
        last = len(self.boundaries)
        if self.truncate != "error" or not (buckets == last).any():
            return
        row = int(np.argmax(buckets == last))
        length = int(self.lengths(chunk, where)[row])
        raise DataError(
            describe(
                f"A list in column {self.column!r} is longer than the last bucket boundary",
                where=f"{where}, row {row}",
                expected=f"at most {self.boundaries[-1]} values (Bucket(boundaries={self.boundaries}))",
                found=f"{length} values",
                fix="add a larger boundary, or cut long rows with truncate='end' or 'start'",
            )
        )

    def batches(self, counts: tuple[int, ...], last_batch: LastBatch) -> int:
        """Batches of an epoch whose buckets hold ``counts`` rows."""
        return sum(num_batches(rows, size, last_batch) for rows, size in zip(counts, self.batch_sizes))

    def op(self) -> Op:
        """The per-batch op padding the column to the boundary of the batch's bucket (its longest row's)."""

        def bucket_pad(batch: Chunk) -> Chunk:
            return pad_to_boundary(batch, self)

        bucket_pad.__name__ = "bucket_pad"
        bucket_pad.identity = self.identity()  # type: ignore[attr-defined]
        return bucket_pad


def pad_to_boundary(batch: Chunk, bucket: Bucket) -> Chunk:
    """The batch with its bucket column padded to its bucket's boundary, and the length or mask column.

    Every row of a batch is in one bucket, so the bucket is the one of its
    longest row (after cutting to the last boundary).
    """
    column = batch[bucket.column]
    if not isinstance(column, Ragged):  # the router refused it before a batch was made
        raise ArgumentError(describe(f"The bucket column {bucket.column!r} is not a list column"))
    longest = int(column.lengths().max()) if len(column) else 0
    boundary = bucket.boundaries[min(int(bucket.bucket_of(np.asarray(longest))), len(bucket.boundaries) - 1)]
    pad = Pad(length=boundary, value=bucket.value, truncate=bucket.truncate, mark=bucket.mark)
    out: Chunk = {}
    for name, values in batch.items():
        if name != bucket.column:
            out[name] = values
            continue
        padded, kept = pad_rows(column, pad, name)
        out[name] = padded
        if bucket.mark == "length":
            out[f"{name}_length"] = kept.astype(np.int32)
        elif bucket.mark == "mask":
            out[f"{name}_mask"] = np.arange(boundary) < kept[:, None]
    return out


@dataclass(frozen=True)
class BucketPosition:
    """Where a bucketed epoch stands after a batch (the module doc says how it resumes).

    ``row``: rows of the epoch's order routed so far. ``waiting``: the
    numbers, in that order, of the routed rows still waiting in a bucket
    (increasing). ``served``: batches served by each bucket.
    """

    row: int = 0
    waiting: tuple[int, ...] = ()
    served: tuple[int, ...] = ()

    @property
    def restart(self) -> int:
        """The first row a resumed epoch reads: the first waiting row, or the next row."""
        return self.waiting[0] if self.waiting else self.row

    @property
    def batches(self) -> int:
        return sum(self.served)


class _Held:
    """One bucket's waiting rows: copies (a view would keep the whole piece alive) and their row numbers."""

    def __init__(self) -> None:
        self.parts: list[Chunk] = []
        self.rows: list[np.ndarray] = []
        self.count = 0

    def numbers(self) -> np.ndarray:
        return np.concatenate(self.rows) if self.rows else np.zeros(0, dtype=np.int64)


class BucketBatcher:
    """Routes positioned pieces into buckets and yields each bucket's batches with the position after them.

    The counterpart of :class:`~streamfeed.runtime.batch.Batcher` (same
    ``room``, ``add``, ``finish``). ``resume``: the position to resume
    from; the epoch's pieces then start at its :attr:`BucketPosition.restart`.
    """

    def __init__(self, bucket: Bucket, plan: EpochPlan, last_batch: LastBatch, resume: BucketPosition) -> None:
        self.bucket, self.plan, self.last_batch = bucket, plan, last_batch
        count = len(bucket.boundaries)
        self._held = [_Held() for _ in range(count)]
        self._served = list(resume.served) if resume.served else [0] * count
        self._row = resume.row
        self._resumed_to = resume.row  # rows before it were routed before the resume: only the waiting ones again
        self._waiting = np.asarray(resume.waiting, dtype=np.int64)

    @property
    def room(self) -> int:
        """Rows per piece the shuffled path gathers: any size serves the same batches; the rows the buckets
        hold at most (what the layout sizes), as smaller pieces cost more per row in routing (benchmarks/)."""
        return sum(self.bucket.batch_sizes)

    @property
    def first(self) -> int:
        """The number of the next batch in the epoch."""
        return sum(self._served)

    def add(self, chunk: Chunk, unit: int, offset: int, unit_rows: int) -> Iterator[tuple[Chunk, BucketPosition]]:
        """Routes rows ``offset..`` of read unit ``unit`` (``chunk`` starts there); yields the batches completed."""
        rows = chunk_len(chunk)
        base = self.plan.rows_before(unit) + offset
        where = f"rows {base}..{base + rows - 1} of the epoch's order (read unit {unit}, offset {offset})"
        buckets = self.bucket.bucket_of(self.bucket.lengths(chunk, where))
        self.bucket.check_lengths(buckets, chunk, where)
        buckets = np.minimum(buckets, len(self.bucket.boundaries) - 1)
        numbers = np.arange(base, base + rows, dtype=np.int64)
        if base < self._resumed_to:  # replaying after a resume: the rows served already are not routed again
            routed = (numbers >= self._resumed_to) | np.isin(numbers, self._waiting)
            buckets = np.where(routed, buckets, -1)
        chosen = [np.flatnonzero(buckets == index) for index in range(len(self._held))]
        # The row completing each batch, in row order: which bucket emits first is the data's, not the piece's.
        events = sorted(
            (int(picked[at]), index)
            for index, picked in enumerate(chosen)
            for at in range(
                self.bucket.batch_sizes[index] - self._held[index].count - 1,
                len(picked),
                self.bucket.batch_sizes[index],
            )
        )
        taken = [0] * len(self._held)
        for completing, index in events:
            picked = chosen[index]
            upto = int(np.searchsorted(picked, completing, side="right"))
            self._take(index, chunk, picked[taken[index] : upto], base)
            taken[index] = upto
            batch = self._flush(index)
            waiting = [held.numbers() for held in self._held] + [
                base + picked_rows[taken[other] : int(np.searchsorted(picked_rows, completing, side="right"))]
                for other, picked_rows in enumerate(chosen)
            ]
            self._row = max(self._row, base + completing + 1)
            yield batch, self._position(np.sort(np.concatenate(waiting)))
        for index, picked in enumerate(chosen):
            self._take(index, chunk, picked[taken[index] :], base)
        self._row = max(self._row, base + rows)

    def finish(self) -> Iterator[tuple[Chunk, BucketPosition]]:
        """Each bucket's short rest under the last-batch policy, in boundary order."""
        self._row = max(self._row, self.plan.total_rows)
        for index, held in enumerate(self._held):
            if not held.count:
                continue
            if self.last_batch == "drop":
                held.parts, held.rows, held.count = [], [], 0
                continue
            real, size = held.count, self.bucket.batch_sizes[index]
            batch = self._flush(index)
            if self.last_batch == "pad":
                batch = pad_batch(batch, real, size)
            waiting = [other.numbers() for other in self._held]
            yield batch, self._position(np.sort(np.concatenate(waiting)))

    def _take(self, index: int, chunk: Chunk, picked: np.ndarray, base: int) -> None:
        if not len(picked):
            return
        held = self._held[index]
        held.parts.append({name: column[picked] for name, column in chunk.items()})
        held.rows.append(base + picked)
        held.count += len(picked)

    def _flush(self, index: int) -> Chunk:
        held = self._held[index]
        batch = concat_chunks(held.parts)
        if self.last_batch == "pad":  # every batch carries the mask, so all batches have the same columns
            batch = {**batch, PAD_MASK: np.ones(held.count, dtype=np.float32)}
        held.parts, held.rows, held.count = [], [], 0
        self._served[index] += 1
        return batch

    def _position(self, waiting: np.ndarray) -> BucketPosition:
        return BucketPosition(self._row, tuple(waiting.tolist()), tuple(self._served))
