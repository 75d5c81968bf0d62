"""Exact-size batching with an explicit last-batch policy.

Batches are views into the incoming chunks where a batch lies inside one
chunk, and one copy where it spans two. Each batch carries the position
of the row after its last row, which is the iterator state to save.
"""

from __future__ import annotations

from typing import Iterator, Literal

import numpy as np

from ..core import Chunk, Position, chunk_len, concat_chunks, slice_chunk
from ..errors import ArgumentError, describe

LastBatch = Literal["keep", "drop", "pad"]
PAD_MASK = "__streamfeed_pad_mask__"
"""Column added by ``last_batch="pad"``: 1.0 for real rows, 0.0 for padding."""


def num_batches(rows: int, batch_size: int, last_batch: LastBatch) -> int:
    """Batches an epoch of ``rows`` rows yields under the policy."""
    if last_batch == "drop":
        return rows // batch_size
    return -(-rows // batch_size)


class Batcher:
    """Turns positioned chunks into exact batches.

    Feed it ``(chunk, unit, offset)`` pieces in order with :meth:`add`, which
    yields every complete batch; :meth:`finish` yields the last one under the
    policy.
    """

    def __init__(self, batch_size: int, last_batch: LastBatch) -> None:
        if batch_size < 1:
            raise ArgumentError(describe("Invalid batch_size", expected=">= 1", found=f"{batch_size}"))
        self.batch_size = batch_size
        self.last_batch = last_batch
        self._pieces: list[Chunk] = []
        self._held = 0
        self._end = Position()

    @property
    def room(self) -> int:
        """Rows that would complete the next batch."""
        return self.batch_size - self._held

    def add(self, chunk: Chunk, unit: int, offset: int, unit_rows: int) -> Iterator[tuple[Chunk, Position]]:
        """Adds rows ``offset..`` of read unit ``unit`` (``chunk`` starts there)."""
        rows = chunk_len(chunk)
        start = 0
        while start < rows:
            take = min(self.batch_size - self._held, rows - start)
            # The whole chunk (a shuffled piece sized to the batch's room) needs no slicing.
            self._pieces.append(chunk if take == rows else slice_chunk(chunk, start, start + take))
            self._held += take
            start += take
            end = offset + start
            self._end = Position(unit + 1, 0) if end >= unit_rows else Position(unit, end)
            if self._held == self.batch_size:
                yield self._flush()

    def finish(self) -> Iterator[tuple[Chunk, Position]]:
        if not self._held or self.last_batch == "drop":
            self._pieces, self._held = [], 0
            return
        if self.last_batch == "pad":
            real = self._held
            batch, end = self._flush()
            yield pad_batch(batch, real, self.batch_size), end
            return
        yield self._flush()

    def _flush(self) -> tuple[Chunk, Position]:
        batch = concat_chunks(self._pieces)
        if self.last_batch == "pad":
            # Every batch carries the mask, so all batches have the same columns.
            batch = {**batch, PAD_MASK: np.ones(self._held, dtype=np.float32)}
        self._pieces, self._held = [], 0
        return batch, self._end


def pad_batch(batch: Chunk, real: int, size: int) -> Chunk:
    """Fills a short batch to ``size`` by repeating its rows, masked with weight 0."""
    index = np.arange(size) % real
    padded = {name: np.take(column, index, axis=0) for name, column in batch.items() if name != PAD_MASK}
    mask = np.zeros(size, dtype=np.float32)
    mask[:real] = 1.0
    padded[PAD_MASK] = mask
    return padded
