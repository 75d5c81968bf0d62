"""Row-level shuffling inside a read unit (a window of several fragments).

Together with the plan's per-epoch fragment order this approaches a global
shuffle: a row can land anywhere in the epoch at coarse grain, and next to
any row of the ``window`` fragments read with it at fine grain. Because a
unit's permutation is a pure function of ``(seed, epoch, shard, unit)``,
resuming needs only the unit number and an offset: the unit is re-read and
permuted again, identically.

Each unit is copied into one of two buffers reused from unit to unit (and
from epoch to epoch) and each batch is gathered from it directly: one copy
per row, and no fresh window-sized allocation per unit (whose page faults
cost more than the gather itself, measured: 0.23 s vs 0.06 s for a 95 MB
window). Two, so that the next unit loads while this one is served
(``runtime/units.py``).

Wide rows (an image, :data:`WIDE_ROW_BYTES` or more a row) are not copied
into a buffer: the unit keeps the chunks as read and a batch copies each
of its rows straight from its chunk, so each row is copied once, not twice
(a 256x256 RGB image: the unit copy was 7 % of a shuffled epoch's CPU
samples, measured with py-spy on 2 000 JPEGs decoded from 1024x1024).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Iterator, Mapping, Protocol

import numpy as np

from ..core import Chunk, chunk_len, interleave
from ..core_ragged import Ragged, concatenate
from ..plan import epoch_rng
from .assembly import MatrixColumns
from .object_codes import few_distinct, object_codes

_SHUFFLE_STREAM = 1  # keeps row permutations independent of the fragment order stream
_POLL_SECONDS = 0.05  # how often a loader waiting for a buffer checks whether it was stopped
# A row this wide is gathered from its chunk, one copy a row: per-row indexing costs ~1 us, a 64 KiB copy ~5.
WIDE_ROW_BYTES = 64 * 1024


def unit_permutation(rows: int, *, seed: int, epoch: int, shard_index: int, unit_index: int) -> np.ndarray:
    """The order in which a unit's rows are emitted."""
    return epoch_rng(seed, epoch, _SHUFFLE_STREAM, shard_index, unit_index).permutation(rows)


class UnitBuffer:
    """Holds one unit's rows in buffers reused across units; gathers batches.

    One-dimensional columns of the same dtype are stored side by side in
    one row-major block, so a batch is one row gather per dtype rather than
    one gather per column (33 columns: 64 k ``take`` calls an epoch became
    2 k); columns of several dtypes share one block of bytes
    (:class:`_PackedRows`), so that is one gather too. An object column of
    few distinct objects (a category's text) rides in that block as int32
    codes into the objects, which the unit keeps once each
    (``runtime/object_codes.py``). The model's feature
    columns (``matrix``, set by the packing) get a block of their own, which
    a gather returns as the feature matrix itself: built here, once
    (``runtime/assembly.py``). Chunks are appended
    as they arrive from the reader, each freed right after its copy, so a
    unit never exists twice (as fragments and as the buffer). Reuse is safe
    because nothing downstream keeps a view of the buffers: gathered
    batches are copies.
    """

    def __init__(self) -> None:
        self._blocks: dict[str, np.ndarray] = {}
        self._layout: list[tuple[str, str, int | None]] = []  # (column, block, index in block or None)
        self._groups: dict[str, list[str]] = {}  # side-by-side block -> its columns, in order
        self._matrix: MatrixColumns | None = None  # the block "matrix" holds these columns, gathered as one
        self._ragged: dict[str, list[Ragged]] = {}  # variable-length columns: their chunks, joined at first gather
        self._wide: dict[str, list[np.ndarray]] = {}  # wide-row columns: their chunks, rows gathered from them
        self._starts: list[int] = []  # the first row of each appended chunk (the wide columns' chunk starts)
        self._packed: _PackedRows | None = None  # 1-D numeric columns of several dtypes, side by side in bytes
        self._distinct: dict[str, list[np.ndarray]] = {}  # coded object columns: each chunk's distinct objects
        self._rows = 0

    @property
    def rows(self) -> int:
        """Rows loaded into the current unit so far."""
        return self._rows

    def begin(self, first: Chunk, capacity: int, matrix: MatrixColumns | None = None) -> None:
        """Starts a unit whose columns are ``first``'s, with room for ``capacity`` rows (it grows if needed).

        With ``matrix`` (and its columns in ``first``), those columns are stored as the matrix it names.
        """
        self._groups, self._layout, self._rows, self._ragged, self._wide, self._starts = {}, [], 0, {}, {}, []
        self._packed, self._distinct = None, {}
        self._matrix = matrix if matrix is not None and matrix.present(first) else None
        members = set(self._matrix.columns) if self._matrix is not None else set()
        if self._matrix is not None:
            self._groups[_MATRIX] = list(self._matrix.columns)
        for name, column in first.items():
            if name in members:
                if name == self._matrix.columns[0]:  # type: ignore[union-attr]
                    self._layout.append((self._matrix.name, _MATRIX, None))  # type: ignore[union-attr]
            elif isinstance(column, Ragged):  # no fixed row width: kept as it came, its values gathered by offset
                self._ragged[name] = []
                self._layout.append((name, _RAGGED, None))
            elif column.ndim > 1 and column.dtype.kind in "biuf" and column[:1].nbytes >= WIDE_ROW_BYTES:
                self._wide[name] = []
                self._layout.append((name, _WIDE, None))
            elif column.ndim == 1 and column.dtype.kind in "biuf":
                group = self._groups.setdefault(f"dtype:{column.dtype.str}", [])
                self._layout.append((name, f"dtype:{column.dtype.str}", len(group)))
                group.append(name)
            elif column.ndim == 1 and column.dtype == object and few_distinct(column):
                self._distinct[name] = []
                self._layout.append((name, _CODED, None))
            else:
                self._layout.append((name, f"column:{name}", None))
        dtype_groups = [block for block in self._groups if block.startswith("dtype:")]
        if len(dtype_groups) > 1 or self._distinct:  # their rows side by side in one byte block, one gather
            dtypes: dict[PackedKey, np.dtype] = {
                name: first[name].dtype for block in dtype_groups for name in self._groups[block]
            }
            dtypes.update({_codes_of(name): np.dtype(np.int32) for name in self._distinct})
            self._packed = _PackedRows.of(dtypes)
            self._layout = [
                (name, _PACKED, None) if block.startswith("dtype:") else (name, block, index)
                for name, block, index in self._layout
            ]
            for block in dtype_groups:
                del self._groups[block]
            self._block(_PACKED, (capacity, self._packed.width), np.dtype(np.uint8))
        for block_name, names in self._groups.items():
            self._block(block_name, (capacity, len(names)), first[names[0]].dtype)
        for name, block_name, index in self._layout:
            if index is None and block_name not in (_MATRIX, _RAGGED, _WIDE, _PACKED, _CODED):
                self._block(block_name, (capacity, *first[name].shape[1:]), first[name].dtype)

    def append(self, chunk: Chunk) -> None:
        """Copies ``chunk``'s rows after the unit's rows so far."""
        size = chunk_len(chunk)
        start, stop = self._rows, self._rows + size
        for block_name, names in self._groups.items():
            interleave([chunk[name] for name in names], self._room(block_name, stop)[start:stop])
        if self._packed is not None:
            columns: dict[PackedKey, np.ndarray] = self._codes(chunk)
            columns.update(chunk)
            self._packed.write(columns, self._room(_PACKED, stop)[start:stop])
        for name, block_name, index in self._layout:
            if block_name == _RAGGED:
                self._ragged[name].append(chunk[name])  # type: ignore[arg-type]
            elif block_name == _WIDE:
                self._wide[name].append(chunk[name])
            elif index is None and block_name not in (_MATRIX, _PACKED, _CODED):
                self._room(block_name, stop)[start:stop] = chunk[name]
        self._starts.append(start)
        self._rows = stop

    def drop_chunks(self) -> None:
        """Lets go of the chunks and objects the unit keeps (wide, variable-length and coded columns): it is served."""
        self._ragged = {name: [] for name in self._ragged}
        self._wide = {name: [] for name in self._wide}
        self._distinct = {name: [] for name in self._distinct}
        self._starts = []

    def _codes(self, chunk: Chunk) -> dict[PackedKey, np.ndarray]:
        """The coded object columns of ``chunk`` as codes into the unit's distinct objects, keeping the new ones."""
        codes: dict[PackedKey, np.ndarray] = {}
        for name, parts in self._distinct.items():
            chunk_codes, distinct = object_codes(chunk[name])
            codes[_codes_of(name)] = chunk_codes + np.int32(sum(len(part) for part in parts))
            parts.append(distinct)
        return codes

    def _block(self, name: str, shape: tuple, dtype: np.dtype) -> np.ndarray:
        block = self._blocks.get(name)
        if block is None or block.shape[0] < shape[0] or block.shape[1:] != shape[1:] or block.dtype != dtype:
            block = np.empty(shape, dtype=dtype)
            self._blocks[name] = block
        return block

    def _room(self, name: str, rows: int) -> np.ndarray:
        """The block ``name`` with room for ``rows`` rows (a unit larger than announced grows it by half)."""
        block = self._blocks[name]
        if block.shape[0] < rows:
            grown = np.empty((max(rows, block.shape[0] * 3 // 2), *block.shape[1:]), dtype=block.dtype)
            grown[: self._rows] = block[: self._rows]
            self._blocks[name] = block = grown
        return block

    def gather(self, indices: np.ndarray) -> Chunk:
        """Rows at ``indices`` of the loaded unit, as a new chunk."""
        taken = {name: np.take(self._blocks[name][: self._rows], indices, axis=0) for name in self._block_names()}
        # A dtype block's columns are its transpose's rows: ``list(block.T)`` makes them all in one call
        # (measured 18 vs 36 µs a batch for 33 columns, against one ``[:, index]`` each).
        views = {name: list(block.T) for name, block in taken.items() if name.startswith("dtype:")}
        packed = self._packed.columns(taken[_PACKED]) if self._packed is not None else {}
        out: Chunk = {}
        rows_of = self._wide_rows(indices) if self._wide else None
        for name, block_name, index in self._layout:
            if block_name == _WIDE:
                out[name] = self._gather_wide(self._wide[name], rows_of)  # type: ignore[arg-type]
            elif block_name == _PACKED:
                out[name] = packed[name]
            elif block_name == _CODED:
                out[name] = self._distinct_objects(name).take(packed[_codes_of(name)])
            elif block_name == _RAGGED:
                parts = self._ragged[name]
                if len(parts) > 1:
                    parts[:] = [concatenate(parts)]  # the unit is loaded once its first batch is gathered
                out[name] = parts[0].take(indices)  # type: ignore[assignment]
            else:
                out[name] = taken[block_name] if index is None else views[block_name][index]
        return out

    def _distinct_objects(self, name: str) -> np.ndarray:
        """The coded column ``name``'s distinct objects, its codes' table (joined at the unit's first gather)."""
        parts = self._distinct[name]
        if len(parts) != 1:
            parts[:] = [np.concatenate(parts) if parts else np.empty(0, dtype=object)]
        return parts[0]

    def _wide_rows(self, indices: np.ndarray) -> list[tuple[int, int]]:
        """(chunk, row in it) of each of the unit's rows ``indices``."""
        starts = np.asarray(self._starts)
        which = np.searchsorted(starts, indices, side="right") - 1
        return list(zip(which.tolist(), (indices - starts[which]).tolist()))

    @staticmethod
    def _gather_wide(parts: list[np.ndarray], rows_of: list[tuple[int, int]]) -> np.ndarray:
        out = np.empty((len(rows_of), *parts[0].shape[1:]), dtype=parts[0].dtype)
        for position, (part, row) in enumerate(rows_of):
            out[position] = parts[part][row]
        return out

    def _block_names(self) -> list[str]:
        return [
            *self._groups,
            *([_PACKED] if self._packed is not None else []),
            *(
                block
                for _, block, index in self._layout
                if index is None and block not in (_MATRIX, _RAGGED, _WIDE, _PACKED, _CODED)
            ),
        ]


_MATRIX = "matrix"  # the block of the model's feature matrix
_PACKED = "packed"  # the byte block of the 1-D numeric columns (of several dtypes) and of coded columns' codes
_RAGGED = "ragged"  # not a block: a variable-length column, kept as its chunks (core_ragged.py)
_WIDE = "wide"  # not a block: a column of wide rows, kept as its chunks and gathered from them
_CODED = "coded"  # not a block: an object column, kept as its distinct objects and its codes in the packed block


PackedKey = str | tuple[str, str]  # a column's name, or ("codes", name) for a coded column's codes


def _codes_of(name: str) -> PackedKey:
    """The packed block's key of the coded column ``name``'s codes: a tuple, so no column's name can be it."""
    return ("codes", name)


@dataclass(frozen=True)
class _PackedRows:
    """Where each 1-D numeric column sits in a row of one byte block, so that a batch is one gather.

    One block per dtype cost one random cache miss a row per dtype: a click
    log's float64, int64 and float32 columns, 2.1 M-row unit, batch 1 024,
    gathered in 0.046 CPU s per million rows from three blocks against 0.025
    from one (measured). Wider dtypes come first and a row is padded to the
    widest, so every column is aligned in the block and in a gathered batch.
    """

    width: int  # bytes a row
    places: tuple[tuple[PackedKey, np.dtype, int], ...]  # (column, dtype, byte offset in the row)

    @classmethod
    def of(cls, dtypes: dict[PackedKey, np.dtype]) -> "_PackedRows":
        places, offset = [], 0
        for name, dtype in sorted(dtypes.items(), key=lambda item: -item[1].itemsize):  # stable: ties keep order
            places.append((name, dtype, offset))
            offset += dtype.itemsize
        widest = max(dtype.itemsize for dtype in dtypes.values())
        return cls(-(-offset // widest) * widest, tuple(places))

    def write(self, columns: Mapping[PackedKey, np.ndarray], rows: np.ndarray) -> None:
        """Writes ``columns`` (a chunk's, and its codes) into ``rows`` (their rows of the block), tile by tile."""
        for top in range(0, rows.shape[0], _PACKED_TILE_ROWS):
            tile = rows[top : top + _PACKED_TILE_ROWS]
            for name, dtype, offset in self.places:
                _column_of(tile, dtype, offset)[:] = columns[name][top : top + _PACKED_TILE_ROWS]

    def columns(self, rows: np.ndarray) -> dict[PackedKey, np.ndarray]:
        """Each column of ``rows`` (gathered rows of the block), a strided view of them."""
        return {name: _column_of(rows, dtype, offset) for name, dtype, offset in self.places}


def _column_of(rows: np.ndarray, dtype: np.dtype, offset: int) -> np.ndarray:
    return rows[:, offset : offset + dtype.itemsize].view(dtype)[:, 0]


_PACKED_TILE_ROWS = 16384  # a tile of 32-byte rows (512 KiB) stays in cache while its columns are written


class StopSignal(Protocol):
    """What a waiting loader checks to know it was stopped (a ``threading.Event``, or several)."""

    def is_set(self) -> bool: ...


class UnitBuffers:
    """The two unit buffers of a chain of epochs: one served while the next unit loads into the other.

    An epoch's loader takes a buffer before it reads a unit's first chunk
    and its producer gives it back when the unit's last batch is gathered;
    a third unit waits. The next epoch, started early (see
    ``EpochIterator.successor``), shares the pair, so it loads its first
    unit into the buffer the finishing epoch no longer needs and the two
    never hold more than two units between them (the memory layout counts
    two). Every buffer is taken for an owner, and :meth:`release_all`
    returns what a stopped epoch still held.
    """

    def __init__(self, count: int = 2) -> None:
        self._free = [UnitBuffer() for _ in range(count)]
        self._owners: dict[int, tuple[object, UnitBuffer]] = {}  # id(buffer) -> (owner, buffer)
        self._ready = threading.Condition()

    def acquire(self, owner: object, stop: StopSignal) -> UnitBuffer | None:
        """A free buffer for ``owner``, waiting for one; None once ``stop`` is set."""
        with self._ready:
            while not self._free:
                if stop.is_set():
                    return None
                self._ready.wait(_POLL_SECONDS)
            if stop.is_set():
                return None
            buffer = self._free.pop()
            self._owners[id(buffer)] = (owner, buffer)
            return buffer

    def release(self, buffer: UnitBuffer) -> None:
        """Gives ``buffer`` back (a second release is ignored)."""
        with self._ready:
            if self._owners.pop(id(buffer), None) is not None:
                buffer.drop_chunks()
                self._free.append(buffer)
                self._ready.notify()

    def release_all(self, owner: object) -> None:
        """Gives back every buffer ``owner`` still holds."""
        with self._ready:
            for key, (held_by, buffer) in list(self._owners.items()):
                if held_by is owner:
                    del self._owners[key]
                    buffer.drop_chunks()
                    self._free.append(buffer)
            self._ready.notify_all()


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
