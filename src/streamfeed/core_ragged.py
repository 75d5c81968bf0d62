"""Variable-length rows (a token list, a session) as one flat values array and int64 offsets.

A list column whose rows differ in length is served as a :class:`Ragged`:
row ``i`` is ``values[offsets[i]:offsets[i + 1]]``, the layout of an Arrow
``large_list`` (so a Parquet column converts without a loop over rows).
Why this form and not an object array of per-row arrays: it is two
contiguous arrays whatever the row count (no Python object per row, no
pickling per row), slicing rows is a view of the offsets, and gathering
rows by index (the shuffle, the last batch's padding, a filter) is two
vectorised NumPy calls. A model never receives one: Keras 3 has no ragged
tensors on JAX and torch, so a batch is padded into a rectangular array
first (``transforms/padding.py``; converting a Ragged to a NumPy array
raises, saying so).

It speaks the few NumPy operations the pipeline applies to a chunk's
columns (``len``, slicing, integer or boolean indexing, ``np.take`` and
``np.concatenate`` through ``__array_function__``), so the chunk helpers
of ``core.py`` and the runtime carry it unchanged.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .errors import ArgumentError, describe


class Ragged:
    """Rows of different lengths: row ``i`` is ``values[offsets[i]:offsets[i + 1]]``.

    ``values`` is 1-D and numeric; ``offsets`` is int64, one more than the
    rows, non-decreasing (it need not start at 0: a slice keeps its parent's
    values). Treat both as read-only: slices share them.
    """

    __slots__ = ("values", "offsets")

    def __init__(self, values: np.ndarray, offsets: np.ndarray) -> None:
        values = np.asarray(values)
        offsets = np.asarray(offsets, dtype=np.int64)
        if values.ndim != 1 or offsets.ndim != 1 or len(offsets) < 1:
            raise ArgumentError(
                describe(
                    "Invalid ragged column",
                    expected="1-D values and 1-D int64 offsets of at least one entry",
                    found=f"values of shape {values.shape}, offsets of shape {offsets.shape}",
                )
            )
        self.values = values
        self.offsets = offsets

    @classmethod
    def from_rows(cls, rows: Sequence[Sequence[Any]], dtype: Any = None) -> "Ragged":
        """A Ragged holding ``rows`` (lists or 1-D arrays), for tests and small data."""
        lengths = np.array([len(row) for row in rows], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        parts = [np.asarray(row, dtype=dtype) for row in rows]
        values = np.concatenate(parts) if parts else np.empty(0, dtype=dtype or np.float64)
        return cls(values.astype(dtype) if dtype is not None else values, offsets)

    # --------------------------------------------------------------- describing
    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def dtype(self) -> np.dtype:
        """The values' dtype."""
        return self.values.dtype

    @property
    def ndim(self) -> int:
        """1: one entry (a variable-length row) per row."""
        return 1

    @property
    def shape(self) -> tuple[int]:
        return (len(self),)

    @property
    def nbytes(self) -> int:
        """Bytes of this column's rows: their values and offsets (a slice counts its own rows only)."""
        return int(self.offsets[-1] - self.offsets[0]) * self.values.itemsize + self.offsets.nbytes

    def lengths(self) -> np.ndarray:
        """Each row's length, int64."""
        return np.diff(self.offsets)

    def row(self, index: int) -> np.ndarray:
        """Row ``index`` as a view of the values."""
        return self.values[self.offsets[index] : self.offsets[index + 1]]

    def to_list(self) -> list[list[Any]]:
        """The rows as Python lists (as ``pyarrow``'s ``to_pylist`` gives them)."""
        return [self.row(index).tolist() for index in range(len(self))]

    def flat(self) -> np.ndarray:
        """The rows' values end to end (a view when the offsets start where the values do)."""
        return self.values[self.offsets[0] : self.offsets[-1]]

    def __repr__(self) -> str:
        return f"Ragged({len(self)} rows, {int(self.offsets[-1] - self.offsets[0])} values, dtype={self.dtype})"

    # --------------------------------------------------------------- selecting
    def __getitem__(self, key: Any) -> "Ragged":
        if isinstance(key, slice):
            start, stop, step = key.indices(len(self))
            if step == 1:
                return Ragged(self.values, self.offsets[start : max(start, stop) + 1])
            return self.take(np.arange(start, stop, step))
        index = np.asarray(key)
        if index.dtype == bool:
            if index.shape != (len(self),):
                raise ArgumentError(
                    describe("Invalid ragged mask", expected=f"shape ({len(self)},)", found=f"shape {index.shape}")
                )
            return self.take(np.flatnonzero(index))
        if index.dtype.kind in "iu":
            return self.take(index.reshape(-1))
        raise ArgumentError(
            describe(
                "Invalid ragged index",
                expected="a slice of rows, row indices or a boolean mask (one row is .row(i))",
                found=repr(key)[:80],
            )
        )

    def take(self, indices: np.ndarray) -> "Ragged":
        """Rows at ``indices`` (each may repeat), as a new Ragged with its own values."""
        indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        starts = self.offsets[:-1][indices]
        lengths = self.offsets[1:][indices] - starts
        offsets = np.zeros(len(indices) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        # Position of each output value in the source: its row's start plus its place within the row.
        source = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1], dtype=np.int64)
        return Ragged(self.values[source], offsets)

    @property
    def flags(self) -> Any:
        """The values' NumPy flags (whether they are writeable: a writer copies those before queuing them)."""
        return self.values.flags

    def copy(self) -> "Ragged":
        """The same rows in values and offsets of their own."""
        return Ragged(self.flat().copy(), self.offsets - self.offsets[0])

    # --------------------------------------------------------------- NumPy protocol
    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise _not_rectangular()

    def astype(self, dtype: Any, copy: bool = True) -> np.ndarray:
        """Refused, as :meth:`__array__`: a model takes rectangular arrays (pad the batch first)."""
        raise _not_rectangular()

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if func is np.concatenate:
            return concatenate(list(args[0]) if args else list(kwargs["arrays"]))
        if func is np.take:
            array, indices = args[0], args[1] if len(args) > 1 else kwargs["indices"]
            axis = args[2] if len(args) > 2 else kwargs.get("axis", 0)
            if axis not in (0, None) or array is not self:
                return NotImplemented
            return self.take(indices)
        if func is np.shape:
            return self.shape
        return NotImplemented


def _not_rectangular() -> ArgumentError:
    return ArgumentError(
        describe(
            "A ragged (variable-length list) column cannot become a rectangular NumPy array",
            expected="a padded batch: batch(size, pad=Pad(...)) pads each list column and adds its lengths",
            fix="pad the column with Dataset.batch(..., pad=streamfeed.Pad()), or read its .values and .offsets",
        )
    )


def concatenate(parts: Sequence[Ragged]) -> Ragged:
    """The rows of ``parts`` in order, as one Ragged (its values one copy)."""
    if not all(isinstance(part, Ragged) for part in parts):
        raise ArgumentError(
            describe(
                "Cannot join a ragged column with a rectangular one",
                expected="the same column ragged in every chunk",
                found=", ".join(type(part).__name__ for part in parts),
            )
        )
    if len(parts) == 1:
        return parts[0]
    values = np.concatenate([part.flat() for part in parts]) if parts else np.empty(0)
    lengths = np.concatenate([part.lengths() for part in parts]) if parts else np.empty(0, dtype=np.int64)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return Ragged(values, offsets)
