"""64-bit hashes of rows, vectorised over rows, for the quality report's duplicate estimate.

A duplicate row is found by hashing every row to one ``uint64`` and
counting distinct hashes in a HyperLogLog sketch; no set of rows is ever
held. The mixing function is the one the statistics' sketches use
(splitmix64's finaliser, ``stats/mixing.py``).
"""

from __future__ import annotations

import numpy as np

from ..core import Chunk
from ..core_ragged import Ragged
from ..stats.mixing import GOLDEN, mix64


def column_hash(values: np.ndarray) -> np.ndarray:
    """One uint64 per row from the row's bytes, vectorised over rows.

    Strings and bytes become fixed-width arrays first, so equal values hash
    equally; every 8-byte word is mixed and the words are combined with
    per-position multipliers, then mixed once more.
    """
    n = len(values)
    if values.dtype.kind == "O":
        try:
            values = values.astype("U") if any(isinstance(v, str) for v in values[:16]) else values.astype("S")
        except (TypeError, ValueError):
            values = np.array([repr(v) for v in values], dtype="U")
    if values.dtype.kind == "f":
        values = values + 0.0  # -0.0 -> 0.0
    raw = np.ascontiguousarray(values).reshape(n, -1).view(np.uint8).reshape(n, -1)
    width = raw.shape[1]
    if width % 8:
        raw = np.concatenate([raw, np.zeros((n, 8 - width % 8), dtype=np.uint8)], axis=1)
    words = raw.view(np.uint64)
    with np.errstate(over="ignore"):
        weights = mix64(np.arange(1, words.shape[1] + 1, dtype=np.uint64) * GOLDEN) | np.uint64(1)
        h = (mix64(words ^ GOLDEN) * weights).sum(axis=1, dtype=np.uint64)
        return mix64(h + np.uint64(width))


def ragged_hash(values: Ragged) -> np.ndarray:
    """One uint64 per variable-length row: each element's 8-byte word mixed with its position in the row,
    summed per row (a difference of running sums: no loop over rows) and mixed once more with the length."""
    flat = values.flat()
    words = flat + 0.0 if flat.dtype.kind == "f" else flat  # -0.0 -> 0.0
    words = words.astype(np.float64 if flat.dtype.kind == "f" else np.int64).view(np.uint64)
    lengths = values.lengths()
    starts = values.offsets[:-1] - values.offsets[0]
    positions = np.arange(len(words), dtype=np.uint64) - np.repeat(starts, lengths).astype(np.uint64)
    with np.errstate(over="ignore"):
        weights = mix64((positions + np.uint64(1)) * GOLDEN) | np.uint64(1)
        running = np.concatenate([np.zeros(1, np.uint64), np.cumsum(mix64(words ^ GOLDEN) * weights, dtype=np.uint64)])
        per_row = running[starts + lengths] - running[starts]
        return mix64(per_row + lengths.astype(np.uint64) * GOLDEN)


def row_hash(chunk: Chunk) -> np.ndarray:
    """One uint64 per row over all columns of a chunk (in name order, so column order does not matter)."""
    h = None
    with np.errstate(over="ignore"):
        for name in sorted(chunk):
            values = chunk[name]
            column = ragged_hash(values) if isinstance(values, Ragged) else column_hash(np.asarray(values))
            h = column if h is None else mix64(h * GOLDEN + column)
    return h if h is not None else np.zeros(0, dtype=np.uint64)
