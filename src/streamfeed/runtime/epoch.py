"""The producer of one epoch: plan → read → assemble units → batch → batch ops.

This function is the whole data path; the pipeline object only describes
it. It runs in the background thread of :class:`BackgroundIterator`.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Iterator

from ..core import Chunk, Position, chunk_len, slice_chunk
from ..errors import StateError, describe
from ..transforms.batch import Batcher
from ..transforms.shuffle import assemble_unit
from .reader import OrderedReader

if TYPE_CHECKING:
    from ..pipeline import Dataset


def produce_epoch(dataset: "Dataset", epoch: int, start: Position, stop: threading.Event) -> Iterator[tuple[Chunk, Position]]:
    """Yields ``(batch, position after it)`` for ``epoch`` from ``start``.

    Without a batch size, the "batches" are the read units' chunks as they
    come (sliced from ``start``), still positioned.
    """
    plan = dataset.epoch_plan(epoch)
    if start.unit > len(plan.units) or (start.unit < len(plan.units) and start.offset > plan.unit_rows[start.unit]):
        raise StateError(
            describe(
                "The saved position is outside this epoch",
                expected=f"a unit < {len(plan.units)} and an offset within it",
                found=str(start),
                fix="restore state saved by the same pipeline (same files, seed, window, shards)",
            )
        )
    layout = dataset.layout()
    order = [index for unit in plan.units[start.unit :] for index in unit]
    reader = OrderedReader(
        dataset.source.fragments,
        order,
        row_ops=dataset.row_ops,
        threads=layout.read_threads,
        ahead=layout.read_ahead,
        on_error=dataset.on_error,
        report=dataset.report,
        stop=stop,
    )
    batcher = Batcher(dataset.batch_size, dataset.last_batch) if dataset.batch_size else None
    chunks = iter(reader)
    try:
        for unit_index in range(start.unit, len(plan.units)):
            pieces = []
            for _ in plan.units[unit_index]:
                chunk = next(chunks, None)
                if stop.is_set():
                    return
                if chunk is not None:  # None: skipped under on_error="skip"
                    pieces.append(chunk)
            unit = assemble_unit(
                pieces,
                seed=dataset.seed,
                epoch=epoch,
                shard_index=dataset.shard_index,
                unit_index=unit_index,
            ) if pieces else {}
            rows = chunk_len(unit)
            offset = start.offset if unit_index == start.unit else 0
            rest = slice_chunk(unit, offset, rows)
            if batcher is None:
                if rows > offset:
                    yield _apply(dataset, rest), Position(unit_index + 1, 0)
                continue
            for batch, position in batcher.add(rest, unit_index, offset, rows):
                yield _apply(dataset, batch), position
        if batcher is not None:
            for batch, position in batcher.finish():
                yield _apply(dataset, batch), position
    finally:
        reader.close()


def _apply(dataset: "Dataset", batch: Chunk) -> Chunk:
    for op in dataset.batch_ops:
        batch = op(batch)
    return batch
