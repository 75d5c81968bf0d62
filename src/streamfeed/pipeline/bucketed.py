"""Positions of an epoch batched by length (``batch(bucket=...)``): steps known up front, exact resume.

The third kind of positions beside ``resolve.UnitPositions`` and
``resolve.LanePositions``, answering the same questions. A position is a
:class:`~streamfeed.runtime.bucketing.BucketPosition` (rows routed, rows
still waiting, batches served per bucket).

The steps of an epoch are known before its first batch: each bucket's
rows are counted in one pass over the fragments through the per-fragment
ops (``Resolution.fragment_pass``, the pass that counts rows after a
filter: a row's length is in no file's metadata), and an epoch's batches
are the sum over buckets of ``ceil(rows / batch size)`` (``floor`` under
``last_batch="drop"``). Every epoch serves the same rows in another
order, so the count is made once and handed to derived datasets of the
same source, ops and buckets (``Resolution.for_derived``), as the rows
counted after a filter are.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, Callable, Generator, Iterator, Mapping, Protocol, TypeVar

import numpy as np

from ..core import Chunk, chunk_len
from ..errors import ArgumentError, describe
from ..runtime.batch import num_batches
from ..runtime.bucketing import Bucket, BucketPosition
from ..runtime.epoch import produce_epoch
from ..runtime.padding import Pad
from ..runtime.shuffle import UnitBuffers
from ..runtime.spec import EpochSpec
from ..state import make_bucket_state, parse_bucket_state
from .combinations import buckets_not_balanced, buckets_not_sharded
from .settings import Settings

if TYPE_CHECKING:
    from ..plan import EpochPlan
    from ..runtime.metrics import StageMetrics

logger = logging.getLogger("streamfeed")
T = TypeVar("T")


def check_bucket(dataset: Settings, batch_size: int | None, pad: Pad | None, bucket: Bucket) -> None:
    """Refuses what bucketing cannot serve: a batch size beside it, shards, balance, a pad of its column."""
    if not isinstance(bucket, Bucket):
        raise ArgumentError(describe("Invalid bucket", expected="a streamfeed.Bucket or None", found=repr(bucket)[:80]))
    if batch_size is not None:
        raise ArgumentError(
            describe(
                "batch() takes a batch_size or a bucket, not both",
                expected="batch(bucket=Bucket(..., batch_sizes=...)): each bucket has its own batch size",
                found=f"batch_size={batch_size!r}",
                fix="leave batch_size out",
            )
        )
    if dataset.lanes is not None:
        raise buckets_not_sharded()
    if dataset.sampler is not None:
        raise buckets_not_balanced()
    if pad is not None and pad.columns is not None and bucket.column in pad.columns:
        raise ArgumentError(
            describe(
                f"Pad(columns=...) names the bucket column {bucket.column!r}",
                expected="Pad for the other list columns: the bucket pads its own column to its boundary",
                found=f"Pad(columns={pad.columns})",
                fix=f"leave {bucket.column!r} out of Pad(columns=...)",
            )
        )


class Resolved(Protocol):
    """What this module reads of a ``resolve.Resolution`` (which imports this module)."""

    dataset: Settings
    bucket_counts: tuple[int, ...] | None

    def readable(self) -> tuple[bool, ...]: ...

    def fragment_pass(
        self, summarise: Callable[[int, Chunk], T], indices: list[int] | None = None, *, name: str = "pass"
    ) -> Generator[T | None, None, None]: ...

    def counted_rows(self, rows: tuple[int, ...]) -> None: ...

    def fingerprint(self) -> dict: ...

    def epoch_plan(self, epoch: int) -> EpochPlan: ...


class BucketPositions:
    """A bucketed epoch: positions are :class:`BucketPosition`\\ s; steps come from the buckets' counted rows."""

    def __init__(self, resolution: Resolved) -> None:
        self.resolution = resolution
        bucket = resolution.dataset.bucket
        if bucket is None:  # made by Resolution for bucketed datasets only
            raise ArgumentError(describe("BucketPositions needs batch(bucket=...)"))
        self.bucket: Bucket = bucket

    def batch_rows(self) -> int:
        """The most rows held at once: every bucket one row short of full, and the batch (sizes the layout)."""
        return sum(self.bucket.batch_sizes)

    def spec(self, spec: EpochSpec) -> EpochSpec:
        return spec

    def fingerprint(self) -> dict:
        return {"bucket": self.bucket.identity()}

    def counts(self) -> tuple[int, ...]:
        """Rows of each bucket in every epoch, counted once (the module doc)."""
        resolution = self.resolution
        if resolution.bucket_counts is None:
            resolution.bucket_counts = self._count()
        return resolution.bucket_counts

    def _count(self) -> tuple[int, ...]:
        resolution, bucket = self.resolution, self.bucket
        fragments = resolution.dataset.source.fragments
        readable = resolution.readable()
        indices = [index for index, ok in enumerate(readable) if ok]
        logger.info("bucketing: counting the rows of each bucket, one pass over %d fragments", len(fragments))

        def summarise(index: int, chunk: Chunk) -> tuple[int, np.ndarray]:
            fragment = fragments[index]
            return chunk_len(chunk), bucket.counts(chunk, f"{fragment.path}, {fragment.location}")

        total = np.zeros(len(bucket.boundaries), dtype=np.int64)
        rows = dict.fromkeys(range(len(fragments)), 0)
        for index, counted in zip(indices, resolution.fragment_pass(summarise, indices, name="bucket-count")):
            if counted is not None:  # None: skipped as bad input, as the epoch will skip it
                rows[index] = counted[0]
                total += counted[1]
        resolution.counted_rows(tuple(rows[index] for index in range(len(fragments))))  # a filter's count too
        return tuple(int(n) for n in total)

    def batches(self, epoch: int) -> tuple[int, ...]:
        """Each bucket's batches in an epoch."""
        last_batch = self.resolution.dataset.last_batch
        return tuple(num_batches(rows, size, last_batch) for rows, size in zip(self.counts(), self.bucket.batch_sizes))

    def start(self, epoch: int, state: Mapping[str, Any] | None) -> tuple[int, BucketPosition]:
        """Where an epoch starts: at its beginning, or where a saved state says (checked)."""
        if state is None:
            if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
                raise ArgumentError(
                    describe("An epoch number is a count", expected="an integer >= 0", found=repr(epoch))
                )
            return epoch, BucketPosition()
        epoch, row, waiting, served = parse_bucket_state(
            state,
            self.resolution.fingerprint(),
            self.rows,
            self.batches,
            sum(size - 1 for size in self.bucket.batch_sizes),
        )
        return epoch, BucketPosition(row, waiting, served)

    def initial_state(self, epoch: int) -> dict:
        return make_bucket_state(epoch, 0, (), [0] * len(self.bucket.boundaries), self.resolution.fingerprint())

    def batches_left(self, epoch: int, position: BucketPosition) -> int:
        served = position.served or (0,) * len(self.bucket.boundaries)
        return sum(total - done for total, done in zip(self.batches(epoch), served))

    def state(self, epoch: int, position: BucketPosition) -> dict:
        """The state at ``position``; once nothing is left to serve, the next epoch's start."""
        if self.batches_left(epoch, position) == 0:
            return self.initial_state(epoch + 1)
        served = position.served or (0,) * len(self.bucket.boundaries)
        return make_bucket_state(epoch, position.row, position.waiting, served, self.resolution.fingerprint())

    def rows(self, epoch: int) -> int:
        return self.resolution.epoch_plan(epoch).total_rows

    def producer(
        self,
        spec: EpochSpec,
        start: BucketPosition,
        timing: StageMetrics | None,
        buffers: UnitBuffers,
        reads_done: threading.Event,
    ) -> Callable[[threading.Event], Iterator[tuple[Chunk, Any]]]:
        restart = spec.plan.position_of(start.restart)
        return lambda stop: produce_epoch(
            spec, restart, stop, timing, buffers=buffers, reads_done=reads_done, resume=start
        )
