"""Row-level shuffling inside a read unit (a window of several fragments).

Together with the plan's per-epoch fragment order this approaches a global
shuffle: a row can land anywhere in the epoch at coarse grain, and next to
any row of the ``window`` fragments read with it at fine grain. Because a
unit's permutation is a pure function of ``(seed, epoch, shard, unit)``,
resuming needs only the unit number and an offset: the unit is re-read and
permuted again, identically.

The unit is concatenated into one buffer that is reused from unit to unit
and each batch is gathered from it directly: one copy per row, and no
fresh window-sized allocation per unit (whose page faults cost more than
the gather itself, measured: 0.23 s vs 0.06 s for a 95 MB window).
"""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np

from ..core import Chunk, chunk_len, interleave
from ..plan import epoch_rng

_SHUFFLE_STREAM = 1  # keeps row permutations independent of the fragment order stream


def unit_permutation(rows: int, *, seed: int, epoch: int, shard_index: int, unit_index: int) -> np.ndarray:
    """The order in which a unit's rows are emitted."""
    return epoch_rng(seed, epoch, _SHUFFLE_STREAM, shard_index, unit_index).permutation(rows)


class UnitBuffer:
    """Holds one unit's rows in buffers reused across units; gathers batches.

    One-dimensional columns of the same dtype are stored side by side in
    one row-major block, so a batch is one row gather per dtype rather than
    one gather per column (33 columns: 64 k ``take`` calls an epoch became
    2 k). Reuse is safe because nothing downstream keeps a view of the
    buffers: gathered batches are copies.
    """

    def __init__(self) -> None:
        self._blocks: dict[str, np.ndarray] = {}
        self._layout: list[tuple[str, str, int | None]] = []  # (column, block, index in block or None)
        self._rows = 0

    def load(self, pieces: Sequence[Chunk]) -> None:
        """Copies the unit's chunks (in order) into the buffers."""
        rows = sum(chunk_len(piece) for piece in pieces)
        first = pieces[0]
        grouped: dict[str, list[str]] = {}
        self._layout = []
        for name, column in first.items():
            if column.ndim == 1 and column.dtype.kind in "biuf":
                group = grouped.setdefault(f"dtype:{column.dtype.str}", [])
                self._layout.append((name, f"dtype:{column.dtype.str}", len(group)))
                group.append(name)
            else:
                self._layout.append((name, f"column:{name}", None))
        for block_name, names in grouped.items():
            block = self._block(block_name, (rows, len(names)), first[names[0]].dtype)
            start = 0
            for piece in pieces:
                interleave([piece[name] for name in names], block[start : start + chunk_len(piece)])
                start += chunk_len(piece)
        for name, block_name, index in self._layout:
            if index is None:
                block = self._block(block_name, (rows, *first[name].shape[1:]), first[name].dtype)
                np.concatenate([piece[name] for piece in pieces], out=block)
        self._rows = rows

    def _block(self, name: str, shape: tuple, dtype: np.dtype) -> np.ndarray:
        block = self._blocks.get(name)
        if block is None or block.shape[0] < shape[0] or block.shape[1:] != shape[1:] or block.dtype != dtype:
            block = np.empty(shape, dtype=dtype)
            self._blocks[name] = block
        return block[: shape[0]]

    def gather(self, indices: np.ndarray) -> Chunk:
        """Rows at ``indices`` of the loaded unit, as a new chunk."""
        taken = {name: np.take(block[: self._rows], indices, axis=0) for name, block in self._blocks.items()}
        # A dtype block's columns are its transpose's rows: ``list(block.T)`` makes them all in one call
        # (measured 18 vs 36 µs a batch for 33 columns, against one ``[:, index]`` each).
        views = {name: list(block.T) for name, block in taken.items() if name.startswith("dtype:")}
        out: Chunk = {}
        for name, block_name, index in self._layout:
            out[name] = taken[block_name] if index is None else views[block_name][index]
        return out


def permuted_pieces(
    buffer: UnitBuffer, order: np.ndarray, offset: int, sizes: Iterator[int]
) -> Iterator[tuple[Chunk, int]]:
    """Gathers rows ``order[offset:]`` in pieces of the requested sizes.

    Yields ``(piece, start)``, where ``start`` is the piece's first row's
    index in the unit's emitted order.
    """
    start = offset
    rows = len(order)
    while start < rows:
        stop = min(rows, start + next(sizes))
        yield buffer.gather(order[start:stop]), start
        start = stop
