"""Loads a shuffled epoch's read units one ahead of serving, in a thread of their own.

A shuffled unit can emit no row before all of its rows are in memory, so
loading it (copying its fragments into a unit buffer and drawing its
permutation) used to stop the producer: 100–118 ms of copying and 35–50 ms
of permutation per 917 504-row unit, measured, while the 8-batch prefetch
queue ran dry and the model waited. Here the loader fills one buffer of a
:class:`~streamfeed.runtime.shuffle.UnitBuffers` pair while the producer
gathers batches from the other, and hands each loaded unit over through a
one-slot queue (:class:`~streamfeed.runtime.background.BackgroundIterator`,
which owns the thread's shutdown). NumPy's copies and ``take`` release the
GIL, so on two cores the load overlaps the gather and the model's step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator, cast

import numpy as np

from ..core import Chunk
from .shuffle import StopSignal, UnitBuffer, UnitBuffers, unit_permutation
from .spec import EpochSpec

if TYPE_CHECKING:
    from .metrics import StageMetrics


@dataclass
class LoadedUnit:
    """One unit in its buffer: the rows to emit, in order, and what to record as they are."""

    index: int
    buffer: UnitBuffer
    order: np.ndarray  # row indices into the buffer, in emission order (cut at the epoch's bound)
    emitted: int  # the unit's rows as positions count them (the uncut order's length)
    record: Callable[[np.ndarray], None] | None


def load_units(
    spec: EpochSpec,
    units: range,
    chunks: Iterator[Chunk | None],
    buffers: UnitBuffers,
    owner: object,
    stop: StopSignal,
    *,
    first_offset: int,
    bound_offset: tuple[int, int] | None,
    reads_done: Callable[[], None],
    metrics: "StageMetrics | None" = None,
) -> Iterator[LoadedUnit]:
    """Yields ``units`` loaded, reading their chunks (in plan order) from ``chunks``.

    A unit left with no row to emit (all of it skipped, or before
    ``first_offset`` when resuming) is not yielded. ``reads_done`` is called
    once the last chunk has been taken. ``bound_offset`` is ``(unit,
    offset)`` of the first row not emitted, when the epoch ends inside a
    unit (a lane). With ``metrics``, each unit's copying and permutation
    are recorded as assembly (the waits for its chunks are the reader's).
    """
    plan = spec.plan
    for unit_index in units:
        buffer = buffers.acquire(owner, stop)
        if buffer is None:
            return
        labels: list[np.ndarray] = []
        started, loading = False, 0.0
        for _ in plan.units[unit_index]:
            chunk = next(chunks, None)
            if stop.is_set():
                buffers.release(buffer)
                return
            if chunk is None:  # skipped under on_error="skip"
                continue
            began = time.perf_counter()
            if not started:
                # the matrix is written here unless the packing runs per batch (after the buffer)
                buffer.begin(chunk, _expected_rows(spec, unit_index), None if spec.batch_ops else spec.matrix)
                started = True
            buffer.append(chunk)
            if spec.sampler is not None:
                labels.append(spec.sampler.draw_column(chunk))
            loading += time.perf_counter() - began
            del chunk  # the buffer holds the rows now
        if unit_index == units[-1]:
            reads_done()
        offset = first_offset if unit_index == units[0] else 0
        began = time.perf_counter()
        emission = _emission_order(spec, unit_index, labels, buffer.rows if started else 0, offset)
        if metrics is not None:
            metrics.add("assemble", loading + time.perf_counter() - began)
        if emission is None:
            buffers.release(buffer)
            continue
        order, record = emission
        emitted = len(order)
        if bound_offset is not None and unit_index == bound_offset[0]:
            order = order[: bound_offset[1]]
        yield LoadedUnit(unit_index, buffer, order, emitted, record)


def _expected_rows(spec: EpochSpec, unit_index: int) -> int:
    """The rows a unit's fragments announce (the buffer grows if filters or estimates were short)."""
    return max(1, sum(spec.fragments[index].num_rows for index in spec.plan.units[unit_index]))


def _emission_order(
    spec: EpochSpec, unit_index: int, labels: list[np.ndarray], rows: int, offset: int
) -> tuple[np.ndarray, Callable[[np.ndarray], None] | None] | None:
    """The unit's row indices in the order they are emitted, and what to record; None if none remain.

    Shuffled, a seeded permutation of the unit. Balanced, the sampler's
    draw (``k_u`` indices with replacement, ``k_u`` fixed by the plan); it
    too is seeded per unit, so resuming at ``offset`` re-draws the same
    indices and skips the first ``offset``.
    """
    if rows == 0:
        return None
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
    column = np.concatenate(labels)
    order = sampler.draw(column, samples, epoch=epoch, shard_index=spec.shard_index, unit_index=unit_index)
    return order, lambda drawn: sampler.record(epoch, column, drawn)
