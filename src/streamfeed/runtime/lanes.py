"""The data path of one worker of a sharded epoch: its lanes, side by side.

A sharded epoch is the unsharded epoch's row order cut into equal
contiguous lanes (:func:`streamfeed.plan.deal_lanes`). Each lane is the
ordinary data path (:func:`~streamfeed.runtime.epoch.produce_epoch`) run
between two row positions, so it reads only the units it overlaps; a
worker's batch at step ``t`` is the concatenation, in lane order, of its
lanes' ``t``-th slices. Every lane has the same length and applies the
last-batch policy to its own last slice, so every worker has the same
number of steps and the same batch sizes, and global batch ``t`` (all
lanes' ``t``-th slices in lane order) is the same for any worker count.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import TYPE_CHECKING, Generator, Iterator, cast

import numpy as np

from ..core import Chunk, chunk_len, concat_chunks, slice_chunk
from ..errors import DataError, describe
from ..plan import Lanes
from .batch import PAD_MASK, num_batches, pad_batch
from .epoch import apply_batch_ops, produce_epoch
from .spec import EpochSpec

if TYPE_CHECKING:
    from .metrics import StageMetrics


def lane_steps(spec: EpochSpec) -> int:
    """Steps of the sharded epoch: one lane's slices under the last-batch policy."""
    lanes, size = spec.lanes, spec.batch_size
    if lanes is None or not size:
        return 0
    return num_batches(lanes.length, size, spec.last_batch)


def produce_lanes(
    spec: EpochSpec, step: int, stop: threading.Event, metrics: "StageMetrics | None" = None
) -> Iterator[tuple[Chunk, int]]:
    """Yields ``(this worker's batch, global steps done after it)`` from step ``step``.

    The per-batch ops run on the worker's batch (its lanes' slices
    concatenated), as they run on a batch of an unsharded epoch.
    """
    lane_spec = dataclasses.replace(spec, batch_ops=())
    ops_spec = spec if metrics is None else spec.timed(metrics)
    streams = [_lane(lane_spec, lane, step, stop, metrics) for lane in spec.worker_lanes]
    try:
        for done in range(step, lane_steps(spec)):
            parts = []
            for lane, stream in zip(spec.worker_lanes, streams):
                part = next(stream, None)
                if stop.is_set():
                    return
                if part is None:  # a fragment was skipped mid-epoch (on_error="skip"): lanes would differ
                    raise DataError(
                        describe(
                            "A lane ran out of rows before the epoch's last step",
                            where=f"lane {lane}, step {done} of epoch {spec.epoch}",
                            expected=f"{lane_steps(spec)} steps in every lane",
                            found=f"skipped input: {spec.report.to_dict()['entries']}",
                            fix="inspect the files named in the report: every worker must serve every step",
                        )
                    )
                parts.append(part)
            yield apply_batch_ops(ops_spec, concat_chunks(parts), done), done + 1
    finally:
        for stream in streams:
            stream.close()  # closes the lane's reader (produce_epoch's finally)


def _lane(
    spec: EpochSpec, lane: int, step: int, stop: threading.Event, metrics: "StageMetrics | None"
) -> Generator[Chunk, None, None]:
    """Lane ``lane``'s slices from step ``step``: its rows, then its filler rows, under the policy."""
    lanes, plan, size = cast(Lanes, spec.lanes), spec.plan, cast(int, spec.batch_size)  # sharded specs only
    first, last = lanes.starts[lane], lanes.stops[lane]
    real, done = last - first, step * size
    filler = lanes.length - real - max(0, done - real)  # filler rows still to serve
    begin = min(last, first + done)
    masked = lanes.remainder == "pad" or spec.last_batch == "pad"
    inner = dataclasses.replace(spec, last_batch="keep")  # the lane's own last slice is finished here
    if filler > 0 and begin == last:  # resumed past the real rows: read the last one, which filler repeats
        begin = last - 1
        one_row = produce_epoch(inner, plan.position_of(begin), stop, metrics, plan.position_of(last))
        tail: Chunk | None = _masked(_only(one_row), masked)
        held: Chunk | None = None
    else:
        tail = held = None
        batches = produce_epoch(inner, plan.position_of(begin), stop, metrics, plan.position_of(last))
        try:
            for batch, _ in batches:
                rows = chunk_len(batch)
                batch = cast(Chunk, _masked(batch, masked))
                if filler > 0:
                    tail = slice_chunk(batch, rows - 1, rows)
                if rows < size:
                    held = batch  # the lane's short last slice: finished below
                    break
                yield batch
        finally:
            batches.close()  # stops the lane's reader threads, also when the consumer stops early
    if stop.is_set():
        return
    if filler > 0 and tail is not None:
        fill = {name: np.repeat(column, filler, axis=0) for name, column in tail.items()}
        fill[PAD_MASK] = np.zeros(filler, dtype=np.float32)
        held = fill if held is None else concat_chunks([held, fill])
    if held is not None and chunk_len(held):
        yield from _last_slice(held, size, spec)


def _only(batches: Generator[tuple[Chunk, object], None, None]) -> Chunk | None:
    """The first batch of a one-row stream (closing it), or None if it was stopped."""
    try:
        for batch, _ in batches:
            return slice_chunk(batch, 0, 1)
        return None
    finally:
        batches.close()


def _masked(batch: Chunk | None, masked: bool) -> Chunk | None:
    """``batch`` with the padding mask (all real rows) when the epoch's batches carry one."""
    if batch is None or not masked:
        return batch
    return {**batch, PAD_MASK: np.ones(chunk_len(batch), dtype=np.float32)}


def _last_slice(batch: Chunk, size: int, spec: EpochSpec) -> Iterator[Chunk]:
    """The lane's last slice under the last-batch policy; padding keeps the filler rows' zero weights."""
    rows = chunk_len(batch)
    if rows == size or spec.last_batch == "keep":
        yield batch
    elif spec.last_batch == "pad":
        padded = pad_batch(batch, rows, size)
        padded[PAD_MASK][:rows] = batch[PAD_MASK]
        yield padded
    # "drop": a short last slice is left out on every lane alike
