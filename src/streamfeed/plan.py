"""The seeded per-epoch plan: which fragments, in what order, and how it is dealt.

A plan is a pure function of ``(seed, epoch, shard_index, shard_count)`` and
the fragments' sizes. It holds no data; it is what makes runs reproducible,
resumable and shardable. :func:`deal_lanes` cuts the unsharded plan's row
order into equal contiguous *lanes* (MosaicML Streaming's canonical nodes),
which ``Dataset.shard`` deals to workers: every worker then has the same
number of steps, and the global order does not depend on the worker count.
"""

from __future__ import annotations

import bisect
import functools
import itertools
from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np

from .core import Position
from .errors import ArgumentError, describe

Remainder = Literal["drop", "pad"]

WINDOW_BYTES = 128 * 2**20
"""Decoded bytes of the fragments whose rows a default shuffle window mixes.

A property of the data, never of the machine: the window (and so the order
and the saved states) must be the same under any ``memory_limit``, thread
count or autotuning. 128 MiB is what the default 512 MiB limit chose before
(a quarter of it: two unit buffers and two units read ahead), so the default
order is unchanged where the default limit was in force.
"""
MAX_DEFAULT_WINDOW = 64  # fragments: past this a bigger window no longer measurably mixes better


def default_window(row_bytes: float, fragment_rows: float, fragments: int, lanes: int | None) -> int:
    """Fragments per read unit when ``shuffle()`` names no ``window``: :data:`WINDOW_BYTES` of mean fragments.

    Sharded into ``lanes``, each lane's share of :data:`WINDOW_BYTES`, and at
    most a quarter of a lane's fragments: a lane reads every unit it
    overlaps, and small units keep a worker's reads near its share
    (measured: 35-fragment units of 41 fragments made each of 2 workers read
    34 and 41 of the 41). Both depend on the lanes, never on the worker count.
    """
    per_fragment = max(1.0, row_bytes * fragment_rows)
    budget = WINDOW_BYTES // (lanes or 1)
    cap = min(MAX_DEFAULT_WINDOW, fragments) if lanes is None else fragments // (4 * lanes)
    return max(1, min(cap, int(budget // per_fragment)))


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

    def position_of(self, row: int) -> Position:
        """Where row ``row`` of the epoch's order lies, as ``(unit, offset)``; the end is ``(units, 0)``."""
        if row >= self.total_rows:
            return Position(len(self.unit_rows), 0)
        unit = bisect.bisect_right(self._starts, row) - 1
        return Position(unit, row - self._starts[unit])


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


@dataclass(frozen=True)
class Lanes:
    """The epoch's row order cut into ``count`` contiguous lanes of ``length`` rows.

    Lane ``j`` serves rows ``starts[j]:stops[j]`` of the unsharded order,
    then ``length - (stops[j] - starts[j])`` filler rows (``remainder="pad"``
    only: at most one per lane, repeated rows served with weight 0).
    """

    count: int
    rows: int  # N, the epoch's rows
    length: int  # L, rows per lane, filler included
    starts: tuple[int, ...]
    stops: tuple[int, ...]
    remainder: Remainder

    @property
    def dropped(self) -> int:
        """Rows at the end of the order that no lane serves (``remainder="drop"``)."""
        return self.rows - (self.stops[-1] if self.stops else 0)

    @property
    def padded(self) -> int:
        """Filler rows, summed over lanes (``remainder="pad"``)."""
        return sum(self.length - (stop - start) for start, stop in zip(self.starts, self.stops))


def deal_lanes(rows: int, lanes: int, remainder: Remainder) -> Lanes:
    """Cuts ``rows`` rows into ``lanes`` equal contiguous lanes under the remainder policy.

    ``"drop"``: lanes of ``rows // lanes``; the last ``rows % lanes`` rows
    are left out. ``"pad"``: lanes of ``ceil(rows / lanes)``; the last
    ``-rows % lanes`` lanes hold one real row fewer and end with one filler
    row, so no lane is more than one row short (padding the last lane alone
    could leave it empty: 5 rows in 4 lanes). No rows at all deal empty
    lanes (every worker then agrees on an empty epoch); fewer rows than
    lanes is an error, since some worker would get no data.
    """
    if rows and rows < lanes:
        raise ArgumentError(
            describe(
                "Too few rows to deal one to every lane",
                expected=f"at least {lanes} rows (lanes)",
                found=f"{rows} rows in the epoch",
                fix=f"use fewer lanes (shard(..., lanes=n) with n <= {rows}) or more data",
            )
        )
    if remainder == "drop":
        length = rows // lanes
        starts = tuple(j * length for j in range(lanes))
        return Lanes(lanes, rows, length, starts, tuple(s + length for s in starts), remainder)
    length = -(-rows // lanes)
    short = length * lanes - rows  # lanes with one filler row: the last ones
    sizes = [length - (j >= lanes - short) for j in range(lanes)]
    stops = tuple(itertools.accumulate(sizes))
    return Lanes(lanes, rows, length, tuple(stop - size for stop, size in zip(stops, sizes)), stops, remainder)
