"""Per-row random draws that depend on the row, not on who reads it: the generator of ``Dataset.random_map``.

Each row gets its own counter-based stream: its key is splitmix64 of
``(seed, the op's name, epoch, the row's index in the source)`` and its
``c``-th value is splitmix64 of ``key + c * GOLDEN`` (``runtime/mixing.py``),
the splitmix64 sequence started at the key. No state passes between rows
or fragments, so a row draws the same values whichever read thread,
process, shard, memory limit or shuffle order serves it, and after a
resume (the approach of Grain's ``random_map``, which keys Philox on the
seed and the index; tf.data's random ops under ``num_parallel_calls > 1``
and Keras layers advancing one seed generator are not reproducible so).

The draws of one call are vectorised over the rows of the chunk; the
``c`` of each row advances by the values a call draws per row, so the
same calls in the same order give the same values.
"""

from __future__ import annotations

import hashlib
import math
from typing import Sequence

import numpy as np

from ..errors import ArgumentError, describe
from .mixing import GOLDEN, splitmix64

_U = np.uint64
_UNIT = 2.0**-53  # a 53-bit integer times this is a float64 in [0, 1), every value equally likely
Size = int | Sequence[int]


def name_salt(name: str) -> int:
    """A 64-bit number for an op's name: two ops of one seed draw different values."""
    return int.from_bytes(hashlib.blake2b(name.encode("utf-8"), digest_size=8).digest(), "little")


def row_keys(seed: int, salt: int, epoch: int, rows: np.ndarray) -> np.ndarray:
    """Each row's stream key: splitmix64 chained over seed, salt, epoch and the row index."""
    base = int(splitmix64(np.uint64(seed)))
    base = int(splitmix64(np.uint64(base ^ salt)))
    base = int(splitmix64(np.uint64(base ^ epoch)))
    return splitmix64(np.asarray(rows, dtype=np.uint64) ^ _U(base), overwrite=True)


class RowRandom:
    """Random draws for the rows of one chunk, each row's a pure function of its key and the draw's place.

    Every method returns an array whose first axis is the chunk's rows:
    ``size=()`` one value per row (shape ``(rows,)``), ``size=(k,)`` ``k``
    values per row (shape ``(rows, k)``). ``rows`` are the rows' indices in
    the source and ``epoch`` the epoch, as the keys were made from them.
    """

    def __init__(self, keys: np.ndarray, *, rows: np.ndarray, epoch: int) -> None:
        self._keys = np.asarray(keys, dtype=np.uint64)
        self._drawn = 0  # values drawn per row so far: the next call's first counter
        self.rows = rows
        self.epoch = epoch

    @classmethod
    def for_rows(cls, seed: int, salt: int, epoch: int, rows: np.ndarray) -> "RowRandom":
        """The generator of the rows ``rows`` (indices in the source) in ``epoch``."""
        rows = np.asarray(rows, dtype=np.int64)
        return cls(row_keys(seed, salt, epoch, rows), rows=rows, epoch=epoch)

    def __len__(self) -> int:
        return len(self._keys)

    def bits(self, size: Size = ()) -> np.ndarray:
        """Uniform 64-bit integers (``uint64``), shape ``(rows, *size)``: what the other draws are made of."""
        shape = (size,) if isinstance(size, int) else tuple(int(n) for n in size)
        count = math.prod(shape)
        counters = np.arange(self._drawn, self._drawn + count, dtype=np.uint64)
        self._drawn += count
        with np.errstate(over="ignore"):
            states = self._keys[:, None] + counters[None, :] * GOLDEN
        return splitmix64(states, overwrite=True).reshape((len(self._keys), *shape))

    def uniform(self, low: float = 0.0, high: float = 1.0, size: Size = ()) -> np.ndarray:
        """Floats (``float64``) uniform in ``[low, high)``."""
        unit = (self.bits(size) >> _U(11)).astype(np.float64) * _UNIT
        return low + (high - low) * unit

    def normal(self, loc: float = 0.0, scale: float = 1.0, size: Size = ()) -> np.ndarray:
        """Floats (``float64``) from a normal distribution (Box-Muller of two uniforms per value)."""
        first = 1.0 - self.uniform(size=size)  # in (0, 1]: the logarithm is finite
        second = self.uniform(size=size)
        return loc + scale * np.sqrt(-2.0 * np.log(first)) * np.cos(2.0 * np.pi * second)

    def integers(self, low: int, high: int, size: Size = ()) -> np.ndarray:
        """Integers (``int64``) uniform in ``[low, high)``; ``low``/``high`` may be per-row arrays."""
        low_, high_ = np.asarray(low, dtype=np.int64), np.asarray(high, dtype=np.int64)
        if np.any(high_ <= low_):
            raise ArgumentError(describe(f"integers(low, high) needs high > low, got low={low!r}, high={high!r}"))
        span = (high_ - low_).astype(np.float64)
        unit = self.uniform(size=size)
        if span.ndim:  # one range per row, broadcast over the row's values
            span = span.reshape((-1,) + (1,) * (unit.ndim - 1))
            low_ = low_.reshape(span.shape)
        return low_ + np.minimum(np.floor(unit * span), span - 1).astype(np.int64)

    def bernoulli(self, p: float = 0.5, size: Size = ()) -> np.ndarray:
        """Booleans, True with probability ``p``."""
        return self.uniform(size=size) < p
