"""The seeded per-epoch plan: which fragments, in what order, for this worker.

A plan is a pure function of ``(seed, epoch, shard_index, shard_count)`` and
the fragments' sizes. It holds no data; it is what makes runs reproducible,
resumable and shardable.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .errors import ArgumentError, describe


def epoch_rng(seed: int, epoch: int, *stream: int) -> np.random.Generator:
    """A generator determined by the seed, the epoch and a stream id.

    Seeds are mixed with NumPy's SeedSequence, so ``seed`` and ``seed + 1``
    give unrelated streams (unlike ``seed + epoch`` arithmetic).
    """
    return np.random.default_rng(np.random.SeedSequence([seed, epoch, *stream]))


def fragment_order(
    num_fragments: int,
    *,
    seed: int | None,
    epoch: int,
    shard_index: int = 0,
    shard_count: int = 1,
) -> list[int]:
    """Fragment indices this shard reads in ``epoch``.

    Shards take every ``shard_count``-th fragment of the source's order, the
    same in every epoch; the seed then permutes each shard's fragments anew
    each epoch. Fixed membership keeps a shard's row count, and so its steps
    per epoch, the same from epoch to epoch: Keras reads the step count once
    per ``fit``, and synchronous multi-worker training needs it stable.
    Dealing a shuffled order instead would mix more across epochs but
    change every shard's size each epoch.
    """
    if not 0 <= shard_index < shard_count:
        raise ArgumentError(describe("Invalid shard_index", expected=f"in [0, {shard_count})", found=f"{shard_index}"))
    order = np.arange(shard_index, num_fragments, shard_count)
    if seed is not None:
        order = epoch_rng(seed, epoch, shard_index).permutation(order)
    return order.tolist()


@dataclass(frozen=True)
class EpochPlan:
    """The read units of one epoch for one shard, and their row counts.

    A read unit is a group of consecutive fragments (in plan order) whose
    rows are concatenated and, when shuffling, permuted together.
    """

    units: tuple[tuple[int, ...], ...]
    unit_rows: tuple[int, ...]

    @functools.cached_property
    def _starts(self) -> tuple[int, ...]:
        """Rows before each unit, and the total last: a state is taken per batch, in O(1)."""
        return (0, *itertools.accumulate(self.unit_rows))

    @property
    def total_rows(self) -> int:
        return self._starts[-1]

    def rows_before(self, unit: int) -> int:
        return self._starts[min(unit, len(self.unit_rows))]


def make_epoch_plan(
    fragment_rows: Sequence[int],
    *,
    seed: int | None,
    epoch: int,
    window: int,
    shard_index: int = 0,
    shard_count: int = 1,
) -> EpochPlan:
    """Groups this shard's fragment order into read units of ``window`` fragments."""
    order = fragment_order(len(fragment_rows), seed=seed, epoch=epoch, shard_index=shard_index, shard_count=shard_count)
    order = [index for index in order if fragment_rows[index] > 0]
    units = tuple(tuple(order[i : i + window]) for i in range(0, len(order), window))
    rows = tuple(sum(fragment_rows[index] for index in unit) for unit in units)
    return EpochPlan(units=units, unit_rows=rows)
