"""Row-level shuffling inside a read unit (a window of several fragments).

Together with the plan's per-epoch fragment order this approaches a global
shuffle: a row can land anywhere in the epoch at coarse grain, and next to
any row of the ``window`` fragments read with it at fine grain. Because a
unit's permutation is a pure function of ``(seed, epoch, shard, unit)``,
resuming needs only the unit number and an offset: the unit is re-read and
permuted again, identically.
"""

from __future__ import annotations

from typing import Sequence

from ..core import Chunk, chunk_len, concat_chunks, take_chunk
from ..plan import epoch_rng

_SHUFFLE_STREAM = 1  # keeps row permutations independent of the fragment order stream


def assemble_unit(
    chunks: Sequence[Chunk],
    *,
    seed: int | None,
    epoch: int,
    shard_index: int,
    unit_index: int,
) -> Chunk:
    """Concatenates a unit's fragment chunks; permutes the rows when seeded."""
    unit = concat_chunks(chunks)
    if seed is None:
        return unit
    rng = epoch_rng(seed, epoch, _SHUFFLE_STREAM, shard_index, unit_index)
    return take_chunk(unit, rng.permutation(chunk_len(unit)))
