"""The lengths of a list column's rows: an exact histogram, its quantiles, and bucket boundaries from it.

A list column (a token sequence, a session) costs what its padding costs:
a batch padded to its longest row holds ``rows x longest`` slots, of which
the lengths' sum are values. The histogram answers every question about
that without the data: exact percentiles, the share of pad slots a choice
of bucket boundaries leaves (:func:`padding_waste`), and the boundaries
that leave the least for a number of buckets (:func:`propose_boundaries`).

The histogram is ``{length: rows}``, exact while a column has at most
:data:`LENGTH_BINS` distinct lengths. Past that (genomes, free text) the
lengths are counted in bins of a width that doubles until they fit, each
length rounded *up* to its bin's end, so quantiles and boundaries from it
are never below the truth (a boundary from the histogram holds every row
its bucket is meant to hold); ``bin_width`` says how coarse it is.

A boundary is an inclusive upper length: with boundaries ``[b0, b1]``
bucket 0 holds rows of length ``<= b0``, bucket 1 those in ``(b0, b1]``,
and a last bucket the rest, padded to the longest row (``max``).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ..errors import ArgumentError, describe

LENGTH_BINS = 10_000
"""Distinct lengths (or bins) a histogram keeps: 10,000 pairs are about 150 kB of JSON."""
CANDIDATES = 512
"""Candidate boundaries :func:`propose_boundaries` chooses among (the distinct lengths, or that many
length quantiles when there are more): the search is ``buckets x CANDIDATES^2`` steps, 0.1 s at 8 buckets."""


def count_lengths(lengths: np.ndarray, bin_width: int = 1) -> dict[int, int]:
    """Rows per length (rounded up to a multiple of ``bin_width``) of one fragment: one ``np.unique``."""
    if lengths.size == 0:
        return {}
    keys = lengths if bin_width == 1 else -(-lengths // bin_width) * bin_width
    values, counts = np.unique(keys, return_counts=True)
    return dict(zip(values.tolist(), counts.tolist()))


def coarsen(histogram: Mapping[int, int], bin_width: int) -> tuple[dict[int, int], int]:
    """``histogram`` with its bin width doubled until it has at most :data:`LENGTH_BINS` entries."""
    counts = dict(histogram)
    while len(counts) > LENGTH_BINS:
        bin_width *= 2
        merged: dict[int, int] = {}
        for length, rows in counts.items():
            key = -(-length // bin_width) * bin_width
            merged[key] = merged.get(key, 0) + rows
        counts = merged
    return counts, bin_width


def merge_histograms(
    total: Mapping[int, int], total_width: int, part: Mapping[int, int], part_width: int
) -> tuple[dict[int, int], int]:
    """The sum of two histograms, at the coarser of their bin widths (then coarsened to fit)."""
    width = max(total_width, part_width)
    merged: dict[int, int] = {}
    for histogram, own in ((total, total_width), (part, part_width)):
        for length, rows in histogram.items():
            key = length if own == width else -(-length // width) * width
            merged[key] = merged.get(key, 0) + rows
    return coarsen(merged, width)


def _arrays(histogram: Mapping[int, int]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.array(sorted(histogram), dtype=np.int64)
    rows = np.array([histogram[int(length)] for length in lengths], dtype=np.int64)
    return lengths, rows


def length_quantile(histogram: Mapping[int, int], q: float) -> int:
    """The smallest length with at least a share ``q`` of the rows at or below it (exact)."""
    if not 0.0 <= q <= 1.0:
        raise ArgumentError(describe("q is a share of the rows", expected="a number in [0, 1]", found=str(q)))
    if not histogram:
        raise ArgumentError(describe("No lengths to take a quantile of", expected="a list column with rows"))
    lengths, rows = _arrays(histogram)
    cumulative = np.cumsum(rows)
    index = int(np.searchsorted(cumulative, q * cumulative[-1], side="left"))
    return int(lengths[min(index, len(lengths) - 1)])


def check_boundaries(boundaries: Sequence[int]) -> list[int]:
    """Boundaries as a strictly increasing list of positive ints, or :class:`ArgumentError`."""
    values = [int(b) for b in boundaries]
    if any(b < 1 for b in values) or any(a >= b for a, b in zip(values, values[1:])):
        raise ArgumentError(
            describe(
                "Bucket boundaries are inclusive upper lengths",
                expected="strictly increasing integers >= 1",
                found=str(list(boundaries)),
            )
        )
    return values


def bucket_rows(histogram: Mapping[int, int], boundaries: Sequence[int]) -> list[int]:
    """Rows in each bucket (``len(boundaries) + 1`` of them; the last holds lengths past the last boundary)."""
    lengths, rows = _arrays(histogram)
    bucket = np.searchsorted(np.array(check_boundaries(boundaries), dtype=np.int64), lengths, side="left")
    return np.bincount(bucket, weights=rows, minlength=len(boundaries) + 1).astype(np.int64).tolist()


def padding_waste(histogram: Mapping[int, int], boundaries: Sequence[int] = ()) -> float:
    """The share of pad slots when each bucket's rows are padded to its boundary (the last to the longest row).

    With no boundaries: every row padded to the longest, what a fixed
    ``Pad(length=max)`` costs. A batch padded to *its own* longest row
    wastes less; this is the bound bucketing with ``pad_to_boundary`` gives.
    """
    if not histogram:
        return 0.0
    lengths, rows = _arrays(histogram)
    edges = np.array([*check_boundaries(boundaries), int(lengths[-1])], dtype=np.int64)
    padded_to = edges[np.searchsorted(edges, lengths, side="left")]
    slots = int((padded_to * rows).sum())
    return 1.0 - int((lengths * rows).sum()) / slots if slots else 0.0


def propose_boundaries(histogram: Mapping[int, int], buckets: int) -> list[int]:
    """The ``buckets - 1`` boundaries that leave the fewest pad slots (rows padded to their bucket's end).

    Exact dynamic programming over the candidate ends (every distinct
    length, or :data:`CANDIDATES` length quantiles when there are more):
    the cost of a bucket ``(a, b]`` is ``b * rows - values`` of the rows in
    it, and the last bucket ends at the longest row. Fewer boundaries come
    back when the column has fewer distinct lengths than buckets.
    """
    if buckets < 1:
        raise ArgumentError(describe("buckets counts the buckets", expected=">= 1", found=str(buckets)))
    if not histogram or buckets == 1:
        return []
    lengths, rows = _arrays(histogram)
    if len(lengths) > CANDIDATES:  # the candidates: length quantiles, the longest among them
        picks = np.unique(np.searchsorted(np.cumsum(rows), np.linspace(0, rows.sum(), CANDIDATES + 1)[1:]))
        ends = np.unique(np.append(lengths[np.minimum(picks, len(lengths) - 1)], lengths[-1]))
    else:
        ends = lengths
    # rows and values at or below each candidate end
    below = np.searchsorted(lengths, ends, side="right")
    cum_rows = np.concatenate([[0], np.cumsum(rows)])[below]
    cum_values = np.concatenate([[0], np.cumsum(lengths * rows)])[below]
    m = len(ends)
    k = min(buckets, m)
    # cost[j][i]: least pad slots covering lengths <= ends[i] with j + 1 buckets, the last ending at ends[i]
    own = ends * cum_rows - cum_values  # one bucket from 0 to ends[i]
    cost = own.astype(np.float64)
    choice = np.zeros((k, m), dtype=np.int64)
    history = [cost]
    for j in range(1, k):
        best = np.full(m, np.inf)
        for i in range(j, m):
            previous = np.arange(j - 1, i)  # the previous bucket ends at ends[previous]
            spans = ends[i] * (cum_rows[i] - cum_rows[previous]) - (cum_values[i] - cum_values[previous])
            total = history[-1][previous] + spans
            pick = int(np.argmin(total))
            best[i], choice[j, i] = total[pick], previous[pick]
        history.append(best)
    finals = [history[j][m - 1] for j in range(k)]
    j = int(np.argmin(finals))  # fewer buckets when more cannot leave less
    cut, i = [], m - 1
    while j > 0:
        i = int(choice[j, i])
        cut.append(int(ends[i]))
        j -= 1
    return sorted(cut)
