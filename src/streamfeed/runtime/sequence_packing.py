"""Packing many short sequences into fixed-length rows, with segment ids and positions (``Dataset.pack_sequences``).

A language model trained on documents of 1..512 tokens wastes most of a
1024-token row on padding. Packing puts several documents into one row of
``length`` tokens and says which token belongs to which document: beside
each packed list column ``<name>`` come ``<name>_segment_ids`` (int32: 1..k
for the k sequences of the packed row, in the order they were placed, 0 on
padding, which is last) and ``<name>_positions`` (int32: each token's place
within its own sequence, 0 on padding) — what an attention mask
(``segment_q == segment_k``) and a position embedding need, on every
Keras backend. Several list columns are packed together (inputs and
targets): a source row is one segment of the packed row in every one of
them, each column with its own length. Every other column (a label, an id)
is carried per segment as ``(max_segments, ...)``, the value of segment
``s`` at index ``s - 1`` and 0 past the row's segments.

**Where it runs, and why.** Packing is a per-fragment op in the read
threads, over the rows each fragment yields (after the ops before it). So
the packed rows are a function of the fragment's rows and the settings
alone: the same for any read-thread count, memory limit or worker, and a
resumed epoch re-reads its unit and packs it again, with no replay of what
came before (Grain's iterators replay packing forward from the last
emitted batch). The price is that sequences of two fragments never share a
row, which costs little: the padding measured is no more than Grain's (below).

**Steps known before the first batch.** The packed rows of a fragment are
a function of its rows' lengths, which no file's metadata holds (Parquet
keeps a list's lengths in the column's data), so deriving the count from
lengths needs the same read as counting: ``pack_sequences`` counts like
``filter``. The first question that needs the epoch's length runs one
counting pass through the per-fragment ops, made once and handed to
derived datasets (``Resolution.fragment_rows``). There the op's
``counting`` twin runs in its place: the same checks and placement, no
packed rows written (0.024 CPU s per million tokens against the epoch's
0.060, ``benchmarks/packing.py``). The count is the same in every epoch,
whatever ``seed`` says (below).

**Policy: first-fit decreasing.** A fragment's sequences are sorted by
length, longest first (several columns: by the first column's length, then
the next's), and each goes into the first packed row with room for it in
every column (and fewer than ``max_segments`` segments). Rows of one length
are placed as a group, each row taking as many as fit
(:func:`first_fit_decreasing`), which is exactly first-fit item by item
(equal items fill the first row with room until it is full, then the next)
at one NumPy pass over the open rows per distinct length rather than one
per sequence. Measured on 200 000 sequences of lognormal lengths 1..512 in
rows of 1024 (``benchmarks/packing.py``), it leaves 0.05 % of the tokens as
padding on fragments of 10 000 sequences and 0.39 % on fragments of 1 000,
against 0.69 % for Grain's streaming first-fit over 64 bins (0.39 % over
256), at 1/36 of Grain's CPU per token.

Ties (rows of equal lengths) are broken by ``seed``: a draw keyed on
(seed, epoch, the row's index in the source), so which short sequences
fill which packed row changes from epoch to epoch while the packed rows'
count and lengths do not (equal-length rows are interchangeable to
first-fit); ``seed=None`` breaks them in source order, the same packing
every epoch.

**Rows longer than ``length``.** ``truncate="error"`` (the default)
raises a :class:`~streamfeed.errors.DataError` naming the file, fragment,
row and column, as :class:`~streamfeed.Pad` does; ``"end"`` keeps the first
``length`` values, ``"start"`` the last; ``"split"`` cuts the row into
pieces of ``length`` values (the last shorter), each a segment of its own
with positions from 0 (its other columns repeated per piece). A row empty in
every packed column has no token to carry: it is left out, and counted out.

**Memory.** A packed row holds its tokens, segment ids and positions: the
op declares ``bytes_factor = 3`` (int32 tokens), and the memory layout and
the default shuffle window count the rows it yields at three times the
source's bytes (``Resolution._sizes``). Its per-token index arrays are int32
and updated in place, so packing a fragment needs a few 4-byte arrays of its
tokens beside the packed rows.

Every setting is the op's identity (every field of :class:`Pack`, by
construction), so a state saved under one packing is refused under another.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Callable, Literal, Mapping, Sequence

import numpy as np

from ..core import Chunk, chunk_len
from ..core_ragged import Ragged
from ..errors import ArgumentError, DataError, describe
from .reader import op_place
from .row_random import name_salt, row_keys
from .rows import fragment_key

PackTruncate = Literal["error", "end", "start", "split"]
Op = Callable[[Chunk], Chunk]
_SEEDS = 2**64
_SALT = name_salt("streamfeed.pack")


def _count(value: object, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < minimum:
        raise ArgumentError(describe(f"Invalid pack {name}", expected=f"an integer >= {minimum}", found=repr(value)))
    return int(value)


@dataclass(frozen=True)
class Pack:
    """How ``Dataset.pack_sequences`` packs list columns into rows (module doc).

    ``length``: the tokens of a packed row, for every packed column, or
    ``{column: length}`` (the columns packed, each with its own length).
    ``columns``: the list columns to pack (None: every variable-length
    column, or the keys of ``length``). ``truncate``: what a row longer than
    its column's length does. ``value``: what fills the padding.
    ``max_segments``: the most sequences per packed row, and the width of
    the per-segment columns (None: no cap; those columns are then as wide
    as the packed lengths' sum, the most segments a row can hold).
    ``seed``: how rows of equal lengths are ordered (None: source order).
    """

    length: int | Mapping[str, int] | tuple[tuple[str, int], ...]
    columns: Sequence[str] | None = None
    truncate: PackTruncate = "error"
    value: int | float = 0
    max_segments: int | None = None
    seed: int | None = 0

    def __post_init__(self) -> None:
        columns = self.columns
        if columns is not None:
            if isinstance(columns, str) or not all(isinstance(name, str) for name in columns) or not columns:
                raise ArgumentError(
                    describe("Invalid pack columns", expected="a list of column names, or None", found=repr(columns))
                )
            columns = tuple(columns)
            if len(set(columns)) != len(columns):
                raise ArgumentError(
                    describe("Invalid pack columns", expected="each column named once", found=repr(columns))
                )
        if isinstance(self.length, Mapping) or isinstance(self.length, tuple):
            pairs = tuple(dict(self.length).items())
            if not pairs:
                raise ArgumentError(
                    describe("Invalid pack length", expected="an integer >= 1 or {column: length}", found="{}")
                )
            named = tuple(str(name) for name, _ in pairs)
            if columns is not None and set(columns) != set(named):
                raise ArgumentError(
                    describe(
                        "pack_sequences(length={...}) and columns= name different columns",
                        expected=f"the same columns in both, or columns=None (then {list(named)})",
                        found=f"columns={list(columns)}",
                        fix="leave columns= out: the keys of length= are the columns packed",
                    )
                )
            lengths = tuple((name, _count(n, "length")) for name, (_, n) in zip(named, pairs))
            object.__setattr__(self, "length", lengths)
            columns = named
        else:
            object.__setattr__(self, "length", _count(self.length, "length"))
        object.__setattr__(self, "columns", columns)
        if self.truncate not in ("error", "end", "start", "split"):
            raise ArgumentError(
                describe(
                    "Invalid pack truncate", expected="'error', 'end', 'start' or 'split'", found=repr(self.truncate)
                )
            )
        if isinstance(self.value, bool) or not isinstance(self.value, (int, float)):
            raise ArgumentError(describe("Invalid pack value", expected="a number", found=repr(self.value)))
        if self.max_segments is not None:
            object.__setattr__(self, "max_segments", _count(self.max_segments, "max_segments"))
        if self.seed is not None:
            if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)):
                raise ArgumentError(describe("Invalid pack seed", expected="an integer or None", found=repr(self.seed)))
            if not 0 <= int(self.seed) < _SEEDS:
                raise ArgumentError(
                    describe("Invalid pack seed", expected="an integer in [0, 2**64), or None", found=repr(self.seed))
                )
            object.__setattr__(self, "seed", int(self.seed))

    def capacity(self, column: str) -> int:
        """The packed length of ``column``."""
        return self.length if isinstance(self.length, int) else dict(self.length)[column]

    def identity(self) -> str:
        """Who this packing is in a fingerprint: every field (``dataclasses.asdict``), so none is forgotten."""
        return "streamfeed.pack" + json.dumps(dataclasses.asdict(self), sort_keys=True)

    def added_columns(self) -> tuple[str, ...]:
        """The columns packing adds beside the packed ones (unknown, so empty, when ``columns`` is None)."""
        return tuple(f"{name}_{kind}" for name in self.columns or () for kind in ("segment_ids", "positions"))

    def op(self) -> Op:
        """The per-fragment op that packs a fragment's rows under these settings."""

        def pack(chunk: Chunk) -> Chunk:
            epoch, first_row = fragment_key() or (0, 0)  # outside a fragment's ops: epoch 0, row 0
            return pack_rows(chunk, self, epoch=epoch, first_row=first_row, where=op_place() or "the rows given")

        def counting(chunk: Chunk) -> Chunk:
            return pack_rows(chunk, self, where=op_place() or "the rows given", count_only=True)

        pack.__name__ = counting.__name__ = "pack"
        pack.identity = self.identity()  # type: ignore[attr-defined]
        # What the counting pass runs in its place: the same checks and placement, no packed rows made (a fifth
        # of the op's time, measured), as the count is the same for every epoch and seed.
        pack.counting = counting  # type: ignore[attr-defined]
        # The bytes a packed row holds over the rows it came from: int32 tokens, segment ids and positions, 3x the
        # tokens' (int64 tokens: 2x). The memory layout and the default shuffle window are sized by it (resolve.py).
        pack.bytes_factor = 3.0  # type: ignore[attr-defined]
        if self.columns is not None:
            pack.new_columns = self.added_columns()  # type: ignore[attr-defined]
        return pack


def _packed_names(chunk: Chunk, pack: Pack) -> list[str]:
    """The columns to pack, checked: each a list column, and no list column left unpacked."""
    ragged = [name for name, column in chunk.items() if isinstance(column, Ragged)]
    names = list(pack.columns) if pack.columns is not None else ragged
    missing = [name for name in names if name not in chunk]
    if missing:
        raise ArgumentError(
            describe(
                "pack_sequences() names columns the rows do not have",
                expected=f"columns among {sorted(chunk)}",
                found=", ".join(repr(name) for name in missing),
            )
        )
    if not names:
        raise ArgumentError(
            describe(
                "pack_sequences() found no variable-length list column to pack",
                expected="a list column (a Parquet list of numbers, a CSV list_columns= column, ...)",
                found=f"columns {sorted(chunk)}",
                fix="read the sequences as a list column; call pack_sequences() before a map that pads them",
            )
        )
    for name in names:
        if not isinstance(chunk[name], Ragged):
            raise ArgumentError(
                describe(
                    f"Column {name!r} is not a variable-length list column",
                    expected="a column read as ragged rows (a Parquet list of numbers)",
                    found=f"an array of shape {np.shape(chunk[name])}",
                    fix=f"leave {name!r} out of pack_sequences(columns=...): it is then carried per segment",
                )
            )
    unpacked = [name for name in ragged if name not in names]
    if unpacked:
        raise ArgumentError(
            describe(
                "pack_sequences() leaves list columns unpacked",
                expected="every list column packed: a packed row has no place for a list per segment",
                found=", ".join(repr(name) for name in unpacked),
                fix="add them to pack_sequences(columns=...), or drop them with a map before pack_sequences()",
            )
        )
    return names


def _truncated(
    lengths: np.ndarray, starts: np.ndarray, capacity: np.ndarray, pack: Pack, names: Sequence[str], where: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(source row, starts, lengths)`` of each sequence to place, after the truncation policy."""
    rows = len(lengths)
    too_long = lengths > capacity
    if not too_long.any():
        return np.arange(rows, dtype=np.int64), starts, lengths
    if pack.truncate == "error":
        row = int(np.argmax(too_long.any(axis=1)))
        column = int(np.argmax(too_long[row]))
        raise DataError(
            describe(
                f"A list in column {names[column]!r} is longer than the pack length",
                where=f"{where}, row {row} (of the rows pack_sequences() was given)",
                expected=f"at most {int(capacity[column])} values (pack_sequences(length=...), truncate='error')",
                found=f"{int(lengths[row, column])} values",
                fix="raise the pack length, or pass truncate='end' or 'start' (keep the first or last values) or "
                "'split' (pieces of the length, each a segment of its own)",
            )
        )
    if pack.truncate in ("end", "start"):
        kept = np.minimum(lengths, capacity)
        moved = starts + (lengths - kept) if pack.truncate == "start" else starts
        return np.arange(rows, dtype=np.int64), moved, kept
    pieces = np.maximum(1, (-(-lengths // capacity)).max(axis=1))  # "split"
    source = np.repeat(np.arange(rows, dtype=np.int64), pieces)
    piece = np.arange(len(source), dtype=np.int64) - np.repeat(np.cumsum(pieces) - pieces, pieces)
    offset = piece[:, None] * capacity
    return source, starts[source] + offset, np.clip(lengths[source] - offset, 0, capacity)


def first_fit_decreasing(
    lengths: np.ndarray, capacity: np.ndarray, max_segments: int | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """First-fit of ``lengths`` (sequences x columns, sorted longest first) into rows of ``capacity``.

    Returns each sequence's packed row, its segment (0-based) in that row,
    its first token's place in the row per column, and the rows used. Runs
    of equal lengths are placed together: the first row with room takes as
    many as fit, then the next, which is what first-fit does one by one.
    """
    count, width = lengths.shape
    room = np.empty((count, width), dtype=np.int64)  # at most one packed row per sequence
    segments = np.zeros(count, dtype=np.int64)
    row_of = np.empty(count, dtype=np.int64)
    segment_of = np.empty(count, dtype=np.int64)
    start_of = np.empty((count, width), dtype=np.int64)
    cap = np.iinfo(np.int64).max if max_segments is None else max_segments
    changes = np.flatnonzero((np.diff(lengths, axis=0) != 0).any(axis=1)) + 1
    bounds = [0, *changes.tolist(), count] if count else [0]
    used_rows = 0
    for first, stop in zip(bounds[:-1], bounds[1:]):
        size, many = lengths[first], stop - first
        if many == 1:  # a length of its own (most of a small fragment's): the first row with room, or a new one
            fit = room[:used_rows, 0] >= size[0] if width == 1 else (room[:used_rows] >= size).all(axis=1)
            if max_segments is not None:
                fit &= segments[:used_rows] < max_segments
            row = int(np.argmax(fit)) if used_rows else 0
            if not used_rows or not fit[row]:
                row, used_rows = used_rows, used_rows + 1
                room[row], segments[row] = capacity, 0
            row_of[first], segment_of[first], start_of[first] = row, segments[row], capacity - room[row]
            room[row] -= size
            segments[row] += 1
            continue
        used = size > 0
        fits = (room[:used_rows][:, used] // size[used]).min(axis=1)
        fits = np.minimum(fits, cap - segments[:used_rows])
        rows = np.flatnonzero(fits > 0)
        takes = fits[rows]
        total = np.cumsum(takes)
        last = int(np.searchsorted(total, many))  # the row that takes the group's last sequence
        if last < len(rows):
            rows, takes = rows[: last + 1], takes[: last + 1].copy()
            takes[-1] -= int(total[last]) - many
        rest = many - int(takes.sum())
        if rest:
            per = int(min((capacity[used] // size[used]).min(), cap))
            opened = -(-rest // per)
            new = np.arange(used_rows, used_rows + opened)
            room[new] = capacity
            segments[new] = 0
            used_rows += opened
            rows = np.concatenate([rows, new])
            takes = np.concatenate([takes, np.full(opened, per, dtype=np.int64)])
            takes[-1] = rest - per * (opened - 1)
        order = np.repeat(rows, takes)
        within = np.arange(many, dtype=np.int64) - np.repeat(np.cumsum(takes) - takes, takes)
        row_of[first:stop] = order
        segment_of[first:stop] = segments[order] + within
        start_of[first:stop] = (capacity - room[order]) + within[:, None] * size
        room[rows] -= takes[:, None] * size
        segments[rows] += takes
    return row_of, segment_of, start_of, used_rows


def pack_rows(
    chunk: Chunk, pack: Pack, *, epoch: int = 0, first_row: int = 0, where: str = "", count_only: bool = False
) -> Chunk:
    """``chunk``'s rows packed into fixed-length rows (module doc); ``epoch`` and ``first_row`` key the ties.

    ``count_only``: one boolean column of as many rows, for the counting pass (ties need no draw there).
    """
    names = _packed_names(chunk, pack)
    capacity = np.array([pack.capacity(name) for name in names], dtype=np.int64)
    columns: list[Ragged] = [chunk[name] for name in names]  # type: ignore[misc]  # checked: each a Ragged
    rows = chunk_len(chunk)
    lengths = np.stack([column.lengths() for column in columns], axis=1).reshape(rows, len(names))
    starts = np.stack([column.offsets[:-1] for column in columns], axis=1).reshape(rows, len(names))
    source, starts, lengths = _truncated(lengths, starts, capacity, pack, names, where)
    keep = lengths.any(axis=1)  # a row with no token anywhere has no segment to be
    source, starts, lengths = source[keep], starts[keep], lengths[keep]
    if pack.seed is None or count_only:
        ties = np.arange(len(source), dtype=np.uint64)
    else:
        ties = row_keys(pack.seed, _SALT, epoch, first_row + np.arange(len(source), dtype=np.int64))
    order = np.lexsort((ties, *(-lengths[:, index] for index in reversed(range(len(names))))))
    source, starts, lengths = source[order], starts[order], lengths[order]
    row_of, segment_of, start_of, packed = first_fit_decreasing(lengths, capacity, pack.max_segments)
    if count_only:
        return {"rows": np.zeros(packed, dtype=bool)}
    width = pack.max_segments if pack.max_segments is not None else int(capacity.sum())
    out: Chunk = {}
    for name, column in chunk.items():
        if name not in names:
            carried = np.zeros((packed, width, *column.shape[1:]), dtype=column.dtype)
            carried[row_of, segment_of] = column[source]
            out[name] = carried
            continue
        index = names.index(name)
        size, values, width_of = lengths[:, index], columns[index].values, int(capacity[index])
        # Per-token indices in int32 where they fit, updated in place: the transient memory is a few arrays of the
        # fragment's tokens, each of 4 bytes, rather than of 8 and one more per expression.
        kind = np.int32 if max(len(values), packed * width_of) < 2**31 else np.int64
        within = np.arange(int(size.sum()), dtype=kind)
        within -= np.repeat((np.cumsum(size) - size).astype(kind), size)
        at = np.repeat((row_of * width_of + start_of[:, index]).astype(kind), size)  # into the flat (rows x length)
        at += within
        taken = np.repeat(starts[:, index].astype(kind), size)
        taken += within
        tokens = np.full(packed * width_of, pack.value, dtype=values.dtype)
        tokens[at] = values[taken]
        del taken
        segment_ids = np.zeros(packed * width_of, dtype=np.int32)
        segment_ids[at] = np.repeat((segment_of + 1).astype(np.int32), size)
        positions = np.zeros(packed * width_of, dtype=np.int32)
        positions[at] = within
        out[name] = tokens.reshape(packed, width_of)
        out[f"{name}_segment_ids"] = segment_ids.reshape(packed, width_of)
        out[f"{name}_positions"] = positions.reshape(packed, width_of)
    return out
