"""The producer of one epoch: plan → read → assemble units → batch → batch ops.

This function is the whole data path. It reads only its
:class:`~streamfeed.runtime.spec.EpochSpec` (never the ``Dataset`` that made
it) and runs in the background thread of :class:`BackgroundIterator`.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import TYPE_CHECKING, Callable, Generator, Iterable, Iterator, TypeVar, cast

import numpy as np

from ..core import Chunk, Position, chunk_len, slice_chunk
from ..memory import decoding_within
from .batch import Batcher
from .reader import OrderedReader, apply_ops
from .shuffle import UnitBuffer, permuted_pieces, unit_permutation
from .spec import EpochSpec

if TYPE_CHECKING:
    from .metrics import StageMetrics

T = TypeVar("T")

_UNBATCHED_PIECE_ROWS = 65_536


def produce_epoch(
    spec: EpochSpec,
    start: Position,
    stop: threading.Event,
    metrics: "StageMetrics | None" = None,
    until: Position | None = None,
) -> Generator[tuple[Chunk, Position], None, None]:
    """Yields ``(batch, position after it)`` for the spec's epoch from ``start`` to ``until``.

    ``start`` must lie inside the plan (the dataset checks restored states).
    ``until`` (default: the epoch's end) is the first row not emitted: a lane
    of a sharded epoch is this same path between two row positions, and
    reads only the units it overlaps. Without a batch size, the "batches"
    are the read units' chunks as they come (sliced from ``start``), still
    positioned. With ``metrics``, the stages are timed from outside (ops
    wrapped, generators measured).
    """
    plan = spec.plan
    if metrics is not None:
        spec = spec.timed(metrics)
    layout = spec.layout
    bound = Position(len(plan.units), 0) if until is None else until
    last = min(len(plan.units), bound.unit + (bound.offset > 0))  # units to read: start.unit .. last - 1
    order = [index for unit in plan.units[start.unit : last] for index in unit]
    reader = OrderedReader(
        spec.fragments,
        order,
        row_ops=spec.row_ops,
        threads=layout.read_threads,
        ahead=layout.read_ahead,
        report=spec.report,
        stop=stop,
        metrics=metrics,
        decode_bytes=layout.decode_bytes,
    )
    batcher = Batcher(spec.batch_size, spec.last_batch) if spec.batch_size else None
    # Each batch's number in the epoch, for errors (a resumed state starts on a batch boundary).
    first = (plan.rows_before(start.unit) + start.offset) // spec.batch_size if spec.batch_size else 0
    numbers = itertools.count(first)
    buffer = UnitBuffer() if spec.seed is not None else None
    chunks = iter(reader)
    try:
        for unit_index in range(start.unit, last):
            pieces = []
            for _ in plan.units[unit_index]:
                chunk = next(chunks, None)
                if stop.is_set():
                    return
                if chunk is not None:  # None: skipped under on_error="skip"
                    pieces.append(chunk)
            offset = start.offset if unit_index == start.unit else 0
            limit = bound.offset if unit_index == bound.unit else None
            unit_pieces = _unit_pieces(spec, unit_index, pieces, offset, buffer, batcher, limit)
            for piece, piece_start, rows in _measured(unit_pieces, metrics, "assemble"):
                if batcher is None:
                    end = piece_start + chunk_len(piece)
                    after = Position(unit_index + 1, 0) if end >= rows else Position(unit_index, end)
                    yield apply_batch_ops(spec, piece, next(numbers)), after
                    continue
                for batch, position in _measured(batcher.add(piece, unit_index, piece_start, rows), metrics, "batch"):
                    yield apply_batch_ops(spec, batch, next(numbers)), position
        if batcher is not None:
            for batch, position in _measured(batcher.finish(), metrics, "batch"):
                yield apply_batch_ops(spec, batch, next(numbers)), position
    finally:
        reader.close()


def _unit_pieces(
    spec: EpochSpec,
    unit_index: int,
    pieces: list[Chunk],
    offset: int,
    buffer: UnitBuffer | None,
    batcher: Batcher | None,
    limit: int | None = None,
) -> Iterator[tuple[Chunk, int, int]]:
    """A unit's rows from ``offset`` (to ``limit``) as ``(piece, first row's index, unit rows)``.

    Unshuffled, the pieces are views of the fragments' chunks. Shuffled (and
    balanced, which implies shuffled), each piece is gathered from the unit
    buffer in the unit's emission order, sized to complete the batcher's
    next batch so that batches need no further copy.
    """
    rows = sum(chunk_len(piece) for piece in pieces)
    if rows == 0:
        return
    stop = rows if limit is None else min(rows, limit)
    if buffer is None:
        seen = 0
        for piece in pieces:
            size = chunk_len(piece)
            if seen + size > offset and seen < stop:
                skip = max(0, offset - seen)
                yield slice_chunk(piece, skip, min(size, stop - seen)), seen + skip, rows
            seen += size
        return
    emission = _emission_order(spec, unit_index, pieces, rows, offset)
    if emission is None:
        return
    order, record = emission
    emitted = len(order)  # the unit's rows as positions count them, whatever part of it is emitted
    if limit is not None:
        order = order[:limit]
    buffer.load(pieces)
    pieces.clear()  # the buffer holds the rows now: free the window's fragments before gathering
    sizes = iter(lambda: batcher.room, None) if batcher is not None else itertools.repeat(_UNBATCHED_PIECE_ROWS)
    for piece, piece_start in permuted_pieces(buffer, order, offset, sizes):
        if record is not None:
            record(order[piece_start : piece_start + chunk_len(piece)])
        yield piece, piece_start, emitted


def _emission_order(
    spec: EpochSpec, unit_index: int, pieces: list[Chunk], rows: int, offset: int
) -> tuple[np.ndarray, Callable[[np.ndarray], None] | None] | None:
    """The unit's row indices in the order they are emitted, and what to record; None if none remain.

    Shuffled, a seeded permutation of the unit. Balanced, the sampler's
    draw (``k_u`` indices with replacement, ``k_u`` fixed by the plan); it
    too is seeded per unit, so resuming at ``offset`` re-draws the same
    indices and skips the first ``offset``.
    """
    sampler, epoch = spec.sampler, spec.epoch
    seed = cast(int, spec.seed)  # units are buffered (and so emitted here) only when shuffling
    if sampler is None:
        if rows <= offset:
            return None
        return unit_permutation(rows, seed=seed, epoch=epoch, shard_index=spec.shard_index, unit_index=unit_index), None
    unit_rows = spec.plan.unit_rows
    samples = unit_rows[unit_index]
    if offset == 0 and not any(unit_rows[:unit_index]):
        sampler.reset(epoch)  # the epoch (re)starts: a Keras peek must not count twice
    if samples <= offset:
        return None
    labels = np.concatenate([sampler.label_column(piece) for piece in pieces])
    order = sampler.draw(labels, samples, epoch=epoch, shard_index=spec.shard_index, unit_index=unit_index)
    return order, lambda drawn: sampler.record(epoch, labels[drawn])


def _measured(items: Iterable[T], metrics: "StageMetrics | None", stage: str) -> Iterable[T]:
    """``items`` as they are, or with the time of each step recorded under ``stage``."""
    if metrics is None:
        return items
    return _timed_steps(iter(items), metrics, stage)


def _timed_steps(items: Iterator[T], metrics: "StageMetrics", stage: str) -> Iterator[T]:
    while True:
        started = time.perf_counter()
        try:
            item = next(items)
        except StopIteration:
            return
        rows = chunk_len(item[0]) if isinstance(item, tuple) and isinstance(item[0], dict) else 0
        metrics.add(stage, time.perf_counter() - started, rows=rows)
        yield item


def apply_batch_ops(spec: EpochSpec, batch: Chunk, number: int) -> Chunk:
    """The per-batch ops on the epoch's batch ``number``, which a user function's error names."""
    if not spec.batch_ops:
        return batch
    with decoding_within(spec.layout.decode_bytes):
        return apply_ops(batch, spec.batch_ops, f"batch {number} of epoch {spec.epoch} (both counted from 0)")
