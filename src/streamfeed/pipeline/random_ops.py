"""``Dataset.random_map``'s op: a map whose function is also given each row's own random generator.

``fn(columns, rng)`` runs per fragment in the read threads, as ``map``
does before ``batch``; ``rng`` is a :class:`~streamfeed.runtime.row_random.RowRandom`
for the chunk's rows, keyed on the seed, the op's name, the epoch and each
row's index in the source: the fragment's first row (``runtime/rows.py``)
plus the row's place in the chunk the op is given (after an earlier
``filter`` or a decoder that left bad rows out, the place among the rows
kept: those are the same rows in every run). The epoch and the fragment
reach the op through the fragment's context, which the reader opens
around its ops, so the draws are the same for any thread count, memory
limit, shuffle, shard or resume. After ``batch`` a row's index in the
source is no longer known: ``random_map`` is refused there.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..core import Chunk, chunk_len
from ..errors import ArgumentError, describe
from ..runtime.row_random import RowRandom, name_salt
from ..runtime.rows import fragment_key
from ..runtime.spec import Op
from .ops import op_identity, row_preserving

RandomFn = Callable[[Chunk, RowRandom], Chunk]
_SEEDS = 2**64


def random_op(fn: RandomFn, *, seed: int, name: str | None, version: str | None, batched: bool) -> Op:
    """``fn`` as a per-fragment op given each chunk's :class:`RowRandom`; ``batched``: called after ``batch``."""
    if batched:
        raise ArgumentError(
            describe(
                "random_map() after batch()",
                expected="random_map() before batch(): its draws are keyed on each row's index in the source",
                fix="move .random_map() before .batch()",
            )
        )
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) < _SEEDS:
        raise ArgumentError(
            describe("Invalid random_map seed", expected="an integer in [0, 2**64)", found=repr(seed)[:80])
        )
    label = str(name or getattr(fn, "__name__", "random_map"))
    identity = op_identity(fn, name, version)
    seed, salt = int(seed), name_salt(identity.split("@", 1)[0])  # a new version keeps the draws

    def with_rows(chunk: Chunk) -> Chunk:
        epoch, first = fragment_key() or (0, 0)  # outside a fragment's ops (none run so): epoch 0, row 0
        rows = np.arange(first, first + chunk_len(chunk), dtype=np.int64)
        return fn(chunk, RowRandom.for_rows(seed, salt, epoch, rows))

    # What call_user reads: a user's function stays user code (its errors are bugs), streamfeed's stay its own.
    with_rows.__module__ = str(getattr(fn, "__module__", None) or "?")
    with_rows.__name__ = label
    for attribute in ("new_columns", "leaves_out_rows"):
        if hasattr(fn, attribute):
            setattr(with_rows, attribute, getattr(fn, attribute))
    op = row_preserving(with_rows, label)
    op.identity = f"{identity}#random(seed={seed})"  # type: ignore[attr-defined]
    return op
