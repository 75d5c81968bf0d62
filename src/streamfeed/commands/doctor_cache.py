"""``streamfeed doctor``'s second measurement: would a cache of the converted data make epochs faster?

Two measurements on fragments spread over the data, repeated in rounds
until they agree (or the budget is spent): per row, the cache's own probe
(``cache.probe_cache``, what ``cache(mode="auto")`` decides from); per
epoch, the same pipeline over just those fragments
(``Dataset.with_source(SubsetSource(...))``) from the source and from a
cache of them in a temporary directory. Each gives a ratio per round; the
verdict (:func:`cache_verdict`, a pure function of the measurements) reads
their medians with an interval from the rounds' order statistics, and says
so when an interval straddles a threshold instead of flipping between yes
and no from run to run; the finding states the time budget and what the
measurement took. Its own module because the epochs write and read a real
cache, and the rule for suggesting one (``CACHE_EPOCH_GAIN``) is measured
and explained here.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from ..sources.subset import SubsetSource
from ._options import IMAGE_FORMATS
from .doctor_findings import Finding, count

# A cache is suggested when later epochs measured at least this much faster. Not less: a Parquet file written with
# pyarrow's defaults (dictionary pages) read 1.1-1.6x faster per epoch from the cache's plain pages (4 runs of
# 60,000 rows, and the demo's data), a gain within this shared machine's noise, against 4.5-5.3x for CSV rows.
CACHE_EPOCH_GAIN = 2.0
CACHE_SHARE = 0.3  # of doctor's --seconds: this measurement's budget
MAX_FRAGMENTS = 8  # fragments the measurement reads, spread over the data, as many as FIRST_ROUND_SHARE allows
# Of the budget, the first round's probes, which choose how many fragments to read: a round (the probes, an epoch
# each way) took about twice the probes, and the epoch that writes the cache about as long as they did, so that
# the writing epoch and MIN_ROUNDS rounds fit in the budget.
FIRST_ROUND_SHARE = 1 / 8
MIN_ROUNDS = 3  # rounds before the measurement may stop early; it always measures 2, for a spread
TIGHT = 1.25  # an interval whose high end is within this factor of its low end is narrow enough to stop on
OUTSIDE = 0.1  # the chance, at most, that a ratio's interval misses the median of its rounds (from 5 rounds on)


@dataclass(frozen=True)
class Ratio:
    """A ratio measured in ``samples`` rounds: their median and an interval around it (:func:`ratio_of`)."""

    value: float
    low: float
    high: float
    samples: int

    def interval(self, what: str) -> str:
        """``(4.0–4.6 over 5 epochs)``: the interval and what the ratio was measured over."""
        if self.samples < 2:
            return f"(one of {what}: no spread measured)"
        return f"({self.low:,.1f}–{self.high:,.1f} over {self.samples} {what})"


def ratio_of(samples: Sequence[float]) -> Ratio:
    """The median of ``samples`` with a distribution-free interval for it, from the samples' order statistics.

    The interval runs from the k-th lowest to the k-th highest sample, k
    the largest for which the median lies outside with a chance of at most
    :data:`OUTSIDE` (2 x P(Binomial(n, 1/2) < k)): the lowest to the highest
    up to 7 rounds (outside with 25 % for 3, 6 % for 5), the second lowest
    to the second highest from 8. Order statistics, not Student's interval
    of a mean: a round slowed by another process on a shared machine moves
    them by one place, not by its size, and two rounds already give a
    spread (Student's interval of two reaches 12.7 standard errors either
    side). The interval narrows as rounds add up. One sample has no spread:
    its interval is everything, so it decides nothing.
    """
    ordered = sorted(samples)
    n = len(ordered)
    if n == 0:
        return Ratio(math.nan, 0.0, math.inf, 0)
    middle = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
    if n < 2:
        return Ratio(middle, 0.0, math.inf, n)
    k = 1
    while k < n // 2 and 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n <= OUTSIDE:
        k += 1
    return Ratio(middle, ordered[k - 1], ordered[n - k], n)


def _decision(read: Ratio, epoch: Ratio) -> str:
    """``"cache"``: both intervals clear their thresholds; ``"no cache"``: either lies below; else ``"uncertain"``."""
    from ..cache import AUTO_MIN_RATIO

    if read.high < AUTO_MIN_RATIO or epoch.high < CACHE_EPOCH_GAIN:
        return "no cache"
    if read.low >= AUTO_MIN_RATIO and epoch.low >= CACHE_EPOCH_GAIN:
        return "cache"
    return "uncertain"


def settled(read_ratios: Sequence[float], epoch_gains: Sequence[float]) -> bool:
    """Whether the rounds so far suffice: :data:`MIN_ROUNDS` of them, and a clear verdict or narrow intervals."""
    if min(len(read_ratios), len(epoch_gains)) < MIN_ROUNDS:
        return False
    read, epoch = ratio_of(read_ratios), ratio_of(epoch_gains)
    tight = all(ratio.high <= ratio.low * TIGHT for ratio in (read, epoch))
    return tight or _decision(read, epoch) != "uncertain"


@dataclass(frozen=True)
class CacheRun:
    """What the cache measurement measured: each round's two ratios, and the totals they came from."""

    source_format: str
    fragments: int
    rows: int  # rows of the chosen fragments: one round's probes, one epoch
    source_seconds: float  # the probes' reads from the source, summed over the rounds
    cache_read_seconds: float  # the same rows read back from a cache part, summed over the rounds
    cache_write_seconds: float
    read_ratios: tuple[float, ...]  # per round: the source's read time over the cache part's
    epoch_gains: tuple[float, ...]  # per round: rows/s of an epoch from the cache over one from the source
    epoch_rows: int
    source_rows_per_second: float  # over all the source epochs
    cache_rows_per_second: float  # over all the epochs from the cache
    first_epoch_rows_per_second: float  # the epoch that wrote the cache
    seconds: float  # what the measurement took
    budget: float  # what it was given
    published: bool = False  # a cache of this source is already in the default directory


def cache_verdict(run: CacheRun) -> Finding:
    """The cache finding from the measurements: the decision, said with both ratios and their uncertainty.

    A repair only when both intervals (:func:`ratio_of`) clear their thresholds: the source at
    least ``AUTO_MIN_RATIO`` times slower per row (what ``mode="auto"``
    decides from) and later epochs at least ``CACHE_EPOCH_GAIN`` times
    faster (a Parquet file often reads back faster from a part without
    dictionaries, but its reads rarely set the pace). No cache when either
    interval lies below. Otherwise the finding says which ratio straddles
    its threshold and how to measure longer, instead of a verdict that
    would flip from run to run.
    """
    from ..cache import AUTO_MIN_RATIO

    read, epoch = ratio_of(run.read_ratios), ratio_of(run.epoch_gains)
    decision = _decision(read, epoch)
    rounds = len(run.read_ratios)
    source_per_row = run.source_seconds / max(run.rows * rounds, 1)
    cache_per_row = run.cache_read_seconds / max(run.rows * rounds, 1)
    measured = {
        "decision": decision,
        "fragments": run.fragments,
        "rows": run.rows,
        "probe_rounds": rounds,
        "source_seconds": run.source_seconds,
        "cache_read_seconds": run.cache_read_seconds,
        "cache_write_seconds": run.cache_write_seconds,
        "source_seconds_per_million_rows": 1e6 * source_per_row,
        "cache_seconds_per_million_rows": 1e6 * cache_per_row,
        "read_speedups": list(run.read_ratios),
        "read_speedup": read.value,
        "read_speedup_low": read.low,
        "read_speedup_high": read.high,
        "epoch_rows": run.epoch_rows,
        "epoch_rounds": len(run.epoch_gains),
        "epoch_speedups": list(run.epoch_gains),
        "epoch_speedup": epoch.value,
        "epoch_speedup_low": epoch.low,
        "epoch_speedup_high": epoch.high,
        "source_rows_per_second": run.source_rows_per_second,
        "cache_rows_per_second": run.cache_rows_per_second,
        "first_epoch_rows_per_second": run.first_epoch_rows_per_second,
        "auto_min_ratio": AUTO_MIN_RATIO,
        "epoch_gain_min": CACHE_EPOCH_GAIN,
        "seconds": run.seconds,
        "budget_seconds": run.budget,
        "published_cache": run.published,
    }
    name = run.source_format.upper() if run.source_format in ("csv", "json") else run.source_format
    per, unit, said = (1_000, "images", "1,000") if run.source_format in IMAGE_FORMATS else (1_000_000, "rows", "1 M")
    cost = (
        f"in all, {said} {unit} cost {per * source_per_row:,.2f} s from the source, "
        f"{per * cache_per_row:,.2f} s from the copy"
    )
    reads = f"{read.interval('reads')[:-1]}; {cost})"
    epochs = (
        f"{epoch.interval('epochs each way')[:-1]}; {count(run.source_rows_per_second)} -> "
        f"{count(run.cache_rows_per_second)} {unit}/s)"
    )
    on = (
        f"measured on {run.fragments} fragment{'s' if run.fragments != 1 else ''}, {run.rows:,} {unit}, "
        f"in {run.seconds:,.1f} s of a {run.budget:,.1f} s budget"
    )
    copy, later = f"a cached copy reads {unit}", f"later epochs {epoch.value:,.1f}x as fast {epochs}"
    if decision == "cache":
        first = run.first_epoch_rows_per_second / max(run.source_rows_per_second, 1e-9)
        return Finding(
            "cache",
            True,
            f"{name} decode is the limit: {copy} {read.value:,.1f}x faster {reads}; `.cache()` would make {later}; "
            f"{on}; the first epoch, writing the copy, ran at {first:.0%} of the plain speed",
            measured,
            ".cache() on the dataset (or .cache(mode='auto')): the first epoch writes the copy, later epochs and "
            "runs read it" + ("; a cache of this source is already published" if run.published else ""),
        )
    if decision == "no cache" and read.high < AUTO_MIN_RATIO:
        summary = (
            f"no cache needed: {copy} only {read.value:,.1f}x as fast as the {name} source {reads}, under the "
            f"{AUTO_MIN_RATIO:g}x that would pay for writing it; {later}; {on}"
        )
        return Finding("cache", False, summary, measured)
    if decision == "no cache":
        summary = (
            f"no cache needed: {copy} {read.value:,.1f}x faster than the {name} source {reads}, but later epochs "
            f"were only {epoch.value:,.1f}x as fast {epochs}, under the {CACHE_EPOCH_GAIN:g}x a cache needs: "
            f"reading is not what sets the pace; {on}"
        )
        return Finding("cache", False, summary, measured)
    longer = f"--seconds {2 * run.budget / CACHE_SHARE:,.0f}"
    if epoch.low < CACHE_EPOCH_GAIN:
        doubt = f"{later}: the interval straddles the {CACHE_EPOCH_GAIN:g}x rule"
    else:
        doubt = f"{copy} {read.value:,.1f}x faster {reads}: the interval straddles the {AUTO_MIN_RATIO:g}x rule"
    summary = f"a cache may or may not pay: {doubt}; {on}; measure longer to decide ({longer})"
    return Finding("cache", False, summary, measured)


def cache_finding(dataset: Any, source_format: str, seconds: float) -> Finding:
    """Measures the cache on fragments spread over the data for about ``seconds``, and says the verdict.

    The first round probes fragments spread over the data (the first, the
    last, the middle, the quarters, ...) while its probes stay within
    :data:`FIRST_ROUND_SHARE` of ``seconds``, up to :data:`MAX_FRAGMENTS`:
    a longer epoch measures the pipeline rather than its start. Then an
    epoch over those fragments writes a cache of them in a temporary
    directory, and rounds follow: the per-row probe of each fragment
    (``cache.probe_cache``: the fragment read from the source against the
    same rows read back from a cache part) and an epoch from the source and
    one from the cache (in alternating order, so that a load change on a
    shared machine falls on both), the same pipeline as training's (shuffle,
    batch, threads, memory limit) over just those fragments. Rounds stop
    once :func:`settled`, or when ``seconds`` are spent (after two at least,
    for a spread).
    """
    import tempfile

    from ..cache import default_directory, key_for, probe_cache
    from ..diagnostics import bench
    from ..files.paths import MANIFEST_NAME

    sized = [fragment for fragment in dataset.source.fragments if fragment.num_rows > 0]
    if not sized:
        return Finding("cache", False, "no rows to measure the cache on")
    started = time.perf_counter()
    deadline = started + seconds
    chosen, probes = [], []
    for index in _spread(len(sized)):
        chosen.append(sized[index])
        probes.append(probe_cache(sized[index]))
        spent = time.perf_counter() - started
        if len(chosen) >= MAX_FRAGMENTS or spent + spent / len(chosen) > FIRST_ROUND_SHARE * seconds:
            break  # another fragment would take the first round past its share
    totals = {"source": 0.0, "read": 0.0, "write": 0.0}
    read_ratios: list[float] = []

    def probe_round(round_probes: list[Any]) -> None:
        source = sum(probe.source_seconds for probe in round_probes)
        read = max(sum(probe.read_seconds for probe in round_probes), 1e-9)
        totals["source"] += source
        totals["read"] += read
        totals["write"] += sum(probe.write_seconds for probe in round_probes)
        read_ratios.append(source / read)

    probe_round(probes)
    subset = dataset.with_source(SubsetSource(dataset.source, chosen))
    batches = subset.num_batches()
    epochs = {"source": [0, 0.0], "cache": [0, 0.0]}
    epoch_gains: list[float] = []

    def timed(which: str, data: Any) -> float:
        report = bench(data, seconds=0, max_batches=batches)
        epochs[which][0] += report.rows
        epochs[which][1] += report.seconds
        return report.rows_per_second

    with tempfile.TemporaryDirectory(prefix="streamfeed-doctor-cache-") as directory:
        cached = subset.cache(directory)
        first = bench(cached, seconds=0, max_batches=batches).rows_per_second  # writes the parts
        while True:  # a round: an epoch each way (the order alternating), then the next round's probes
            pair = [("source", subset), ("cache", cached)]
            if len(epoch_gains) % 2:
                pair.reverse()
            rates = {which: timed(which, data) for which, data in pair}
            epoch_gains.append(rates["cache"] / max(rates["source"], 1e-9))
            over = len(epoch_gains) >= 2 and time.perf_counter() >= deadline
            if over or settled(read_ratios, epoch_gains):
                break
            probe_round([probe_cache(fragment) for fragment in chosen])
    published = os.path.isfile(os.path.join(default_directory(), key_for(dataset.source), MANIFEST_NAME))
    run = CacheRun(
        source_format=source_format,
        fragments=len(chosen),
        rows=sum(probe.rows for probe in probes),
        source_seconds=totals["source"],
        cache_read_seconds=totals["read"],
        cache_write_seconds=totals["write"],
        read_ratios=tuple(read_ratios),
        epoch_gains=tuple(epoch_gains),
        epoch_rows=int(subset.num_rows()),
        source_rows_per_second=epochs["source"][0] / max(epochs["source"][1], 1e-9),
        cache_rows_per_second=epochs["cache"][0] / max(epochs["cache"][1], 1e-9),
        first_epoch_rows_per_second=first,
        seconds=time.perf_counter() - started,
        budget=seconds,
        published=published,
    )
    return cache_verdict(run)


def _spread(count: int) -> Iterator[int]:
    """Indexes ``0 .. count - 1`` spread over the range: the first, the last, the middle, the quarters, ..."""
    last, seen = count - 1, set()
    for index in (0, last):
        if index not in seen:
            seen.add(index)
            yield index
    depth = 1
    while len(seen) < count:
        for odd in range(1, 2**depth, 2):
            index = round(odd * last / 2**depth)
            if index not in seen:
                seen.add(index)
                yield index
        depth += 1
