"""The producer of one epoch: plan → read → assemble units → batch → batch ops.

This function is the whole data path. It reads only its
:class:`~streamfeed.runtime.spec.EpochSpec` (never the ``Dataset`` that made
it) and runs in the background thread of :class:`BackgroundIterator`.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import TYPE_CHECKING, Callable, Generator, Iterable, Iterator, TypeVar

from ..core import Chunk, Position, chunk_len, slice_chunk
from ..memory import decoding_within
from .background import BackgroundIterator
from .batch import Batcher
from .bucketing import BucketBatcher, BucketPosition
from .reader import OrderedReader, apply_ops
from .shuffle import UnitBuffers, permuted_pieces
from .spec import EpochSpec
from .units import load_units

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
    *,
    buffers: UnitBuffers | None = None,
    reads_done: threading.Event | None = None,
    resume: BucketPosition | None = None,
) -> Generator[tuple[Chunk, Position | BucketPosition], None, None]:
    """Yields ``(batch, position after it)`` for the spec's epoch from ``start`` to ``until``.

    ``start`` must lie inside the plan (the dataset checks restored states).
    ``until`` (default: the epoch's end) is the first row not emitted: a lane
    of a sharded epoch is this same path between two row positions, and
    reads only the units it overlaps. Without a batch size, the "batches"
    are the read units' chunks as they come (sliced from ``start``), still
    positioned. With ``metrics``, the stages are timed from outside (ops
    wrapped, generators measured). Shuffled, units are loaded one ahead in
    ``buffers`` (a pair of its own if None; see ``runtime/units.py``).
    ``reads_done`` is set once every fragment of the epoch has been read
    and the read pool is shut down: the point from which the next epoch
    can start reading without exceeding the memory layout. Bucketed
    (``spec.bucket``), the positions are :class:`BucketPosition` values and
    ``resume`` is the one to resume from (``start`` is its restart row).
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
        row_ops=spec.reader_ops(),
        threads=layout.read_threads,
        ahead=layout.read_ahead,
        report=spec.report,
        stop=stop,
        metrics=metrics,
        decode_bytes=layout.decode_bytes,
        tuner=spec.tuner,
        epoch=spec.epoch,
    )

    def finish_reading() -> None:
        reader.close()  # idempotent; frees the read threads before the epoch's last batches are served
        if reads_done is not None:
            reads_done.set()

    batcher: Batcher | BucketBatcher | None = None
    # Each batch's number in the epoch, for errors (a resumed state starts on a batch boundary).
    first = (plan.rows_before(start.unit) + start.offset) // spec.batch_size if spec.batch_size else 0
    if spec.bucket is not None:
        batcher = BucketBatcher(spec.bucket, plan, spec.last_batch, resume or BucketPosition())
        first = batcher.first
    elif spec.batch_size:
        batcher = Batcher(spec.batch_size, spec.last_batch)
    numbers = itertools.count(first)
    units = range(start.unit, last)
    pieces: Generator[tuple[Chunk, int, int, int], None, None] | None = None
    try:
        if spec.seed is None:
            pieces = _unshuffled_pieces(spec, units, iter(reader), stop, start, bound, finish_reading)
        else:
            pieces = _shuffled_pieces(
                spec, units, reader, stop, start, bound, buffers, finish_reading, batcher, metrics
            )
        # Not _measured as a whole: these generators wait for reads, which is not assembly (bench's verdict).
        for piece, unit_index, piece_start, rows in pieces:
            if batcher is None:
                end = piece_start + chunk_len(piece)
                after = Position(unit_index + 1, 0) if end >= rows else Position(unit_index, end)
                yield apply_batch_ops(spec, piece, next(numbers)), after
                continue
            added: Iterable[tuple[Chunk, Position | BucketPosition]] = batcher.add(piece, unit_index, piece_start, rows)
            for batch, position in _measured(added, metrics, "batch"):
                yield apply_batch_ops(spec, batch, next(numbers)), position
        if batcher is not None:
            rest: Iterable[tuple[Chunk, Position | BucketPosition]] = batcher.finish()
            for batch, position in _measured(rest, metrics, "batch"):
                yield apply_batch_ops(spec, batch, next(numbers)), position
        if not units:
            finish_reading()
    finally:
        if pieces is not None:
            pieces.close()  # stops the unit loader before its reader closes under it
        reader.close()


def _unshuffled_pieces(
    spec: EpochSpec,
    units: range,
    chunks: Iterator[Chunk | None],
    stop: threading.Event,
    start: Position,
    bound: Position,
    finish_reading: Callable[[], None],
) -> Generator[tuple[Chunk, int, int, int], None, None]:
    """Each unit's rows from ``start`` to ``bound`` as ``(piece, unit, first row's index, unit rows)``: views.

    Slicing views costs microseconds: nothing here is timed as assembly.
    """
    for unit_index in units:
        pieces = []
        for _ in spec.plan.units[unit_index]:
            chunk = next(chunks, None)
            if stop.is_set():
                return
            if chunk is not None:  # None: skipped under on_error="skip"
                pieces.append(chunk)
        if unit_index == units[-1]:
            finish_reading()
        rows = sum(chunk_len(piece) for piece in pieces)
        offset = start.offset if unit_index == start.unit else 0
        limit = min(rows, bound.offset) if unit_index == bound.unit else rows
        seen = 0
        for piece in pieces:
            size = chunk_len(piece)
            if seen + size > offset and seen < limit:
                skip = max(0, offset - seen)
                yield slice_chunk(piece, skip, min(size, limit - seen)), unit_index, seen + skip, rows
            seen += size


def _shuffled_pieces(
    spec: EpochSpec,
    units: range,
    reader: OrderedReader,
    stop: threading.Event,
    start: Position,
    bound: Position,
    buffers: UnitBuffers | None,
    finish_reading: Callable[[], None],
    batcher: Batcher | BucketBatcher | None,
    metrics: "StageMetrics | None",
) -> Generator[tuple[Chunk, int, int, int], None, None]:
    """Each unit's rows gathered in its emission order, the next unit loading meanwhile.

    Each piece is sized to complete the batcher's next batch, so that
    batches need no further copy. A unit's buffer goes back to the pair
    when its last piece is gathered. With ``metrics``, the gathers (here)
    and the loads (in the loader) are timed as assembly, the waits for
    loaded units are not.
    """
    if not units:
        return
    pair = buffers if buffers is not None else UnitBuffers()
    owner = object()  # this epoch's claim on the pair's buffers
    bound_offset = (bound.unit, bound.offset) if bound.offset > 0 else None
    loaded = BackgroundIterator(
        lambda loader_stop: load_units(
            spec,
            units,
            iter(reader),
            pair,
            owner,
            _either(stop, loader_stop),
            first_offset=start.offset,
            bound_offset=bound_offset,
            reads_done=finish_reading,
            metrics=metrics,
        ),
        depth=1,
        name="streamfeed-units",
    )
    sizes = iter(lambda: batcher.room, None) if batcher is not None else itertools.repeat(_UNBATCHED_PIECE_ROWS)
    try:
        for unit in loaded:
            offset = start.offset if unit.index == start.unit else 0
            gathered = permuted_pieces(unit.buffer, unit.order, offset, sizes)
            for piece, piece_start in _measured(gathered, metrics, "assemble"):
                if unit.record is not None:
                    unit.record(unit.order[piece_start : piece_start + chunk_len(piece)])
                yield piece, unit.index, piece_start, unit.emitted
            pair.release(unit.buffer)
    finally:
        loaded.close(wait=True)  # the loader never waits for this thread: joining it is safe
        pair.release_all(owner)


class _either:
    """A stop signal that is set when either of two events is (the epoch's, or the loader's own)."""

    def __init__(self, first: threading.Event, second: threading.Event) -> None:
        self._first, self._second = first, second

    def is_set(self) -> bool:
        return self._first.is_set() or self._second.is_set()


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
        batch = apply_ops(batch, spec.batch_ops, f"batch {number} of epoch {spec.epoch} (both counted from 0)")
    return batch if spec.matrix is None else spec.matrix.assemble(batch)  # the packing ran among the ops
