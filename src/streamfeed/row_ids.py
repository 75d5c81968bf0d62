"""Row ids given by the user (``to_keras(ids=...)``, ``hard_examples(ids=...)``): hashed, checked, made plain.

Per-row tables keyed by id (the quality monitor's margin ledger, the
hard-example sampler's scores) share these, so that both keep the same
rows when bounded and refuse the same bad ids.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from .errors import ArgumentError, describe

FULL_HASH = np.uint64(2**64 - 1)  # a hash cut that keeps every row


def row_hashes(ids: np.ndarray) -> np.ndarray:
    """A stable 64-bit hash per id (integers: splitmix64's mixer; others: BLAKE2b of ``str(id)``).

    Stable across processes and runs (no ``hash()`` salt), so that a table
    bounded by a hash cut keeps the same rows in every epoch and after a resume.
    """
    ids = np.asarray(ids)
    if ids.dtype.kind in "iub":
        z = ids.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)  # array ops wrap silently, as intended
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return np.asarray(z ^ (z >> np.uint64(31)), dtype=np.uint64)
    digests = [hashlib.blake2b(str(value).encode(), digest_size=8).digest() for value in ids.tolist()]
    return np.frombuffer(b"".join(digests), dtype="<u8").astype(np.uint64)


def refuse_nan_ids(ids: np.ndarray) -> None:
    """Raises if an id is NaN: it is unequal to itself, so a table keyed by it would grow by it every epoch."""
    if ids.dtype.kind == "f":
        nan = int(np.count_nonzero(np.isnan(ids)))
    elif ids.dtype.kind == "O":
        nan = sum(1 for value in ids.tolist() if isinstance(value, float) and value != value)
    else:
        return
    if nan:
        raise ArgumentError(
            describe(
                "Row ids are NaN",
                expected="one id per row, never NaN (ids= names a column unique per row)",
                found=f"{nan} of {len(ids)} ids in a batch are NaN",
                fix="fill the id column (or pass another one as ids=)",
            )
        )


def plain_id(value: Any) -> Any:
    """A JSON-able id: bytes decoded, NumPy scalars made Python ones."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value.item() if isinstance(value, np.generic) else value
