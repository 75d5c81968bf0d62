"""``streamfeed doctor``'s second measurement: would a cache of the converted data make epochs faster?

Two measurements on up to :data:`PROBE_FRAGMENTS` fragments spread over the
data: per row, the cache's own probe (``cache.probe_cache``, what
``cache(mode="auto")`` decides from); per epoch, the same pipeline over just
those fragments (``Dataset.with_source(SubsetSource(...))``) from the source
and from a cache of them in a temporary directory. Its own module because
the epochs write and read a real cache, and the rule for suggesting one
(``CACHE_EPOCH_GAIN``) is measured and explained here.
"""

from __future__ import annotations

import os
import time
from typing import Any

from ..sources.subset import SubsetSource
from .doctor_findings import Finding, count

# A cache is suggested when later epochs measured at least this much faster. Not less: a Parquet file written with
# pyarrow's defaults (dictionary pages) read 1.1-1.6x faster per epoch from the cache's plain pages (4 runs of
# 60,000 rows, and the demo's data), a gain within this shared machine's noise, against 4.5-5.3x for CSV rows.
CACHE_EPOCH_GAIN = 2.0
PROBE_FRAGMENTS = 3  # fragments the cache measurement reads, spread over the data


def cache_finding(dataset: Any, source_format: str, seconds: float) -> Finding:
    """The cache's two measurements, on up to :data:`PROBE_FRAGMENTS` fragments spread over the data.

    Per row: ``cache.probe_cache`` (what ``cache(mode="auto")`` decides
    from), the fragment read from the source against the same rows read
    back from a cache part. Per epoch: the same pipeline (shuffle, batch,
    threads, memory limit) over just those fragments, an epoch from the
    source against one from a cache of them written by a first epoch in a
    temporary directory (alternated while ``seconds`` lasts): rows/s, so
    the rest of the pipeline (shuffle, batching, the producer thread) is in
    it. The repair is suggested when ``mode="auto"`` would cache (the source
    at least ``AUTO_MIN_RATIO`` times slower per row) and later epochs
    measured at least ``CACHE_EPOCH_GAIN`` times faster: a Parquet file
    often reads back faster from a part without dictionaries, but its reads
    rarely set the pace.
    """
    from ..cache import AUTO_MIN_RATIO, default_directory, key_for, probe_cache
    from ..files.paths import MANIFEST_NAME

    sized = [fragment for fragment in dataset.source.fragments if fragment.num_rows > 0]
    if not sized:
        return Finding("cache", False, "no rows to measure the cache on")
    last = len(sized) - 1  # the first, the last and between: the data's start may differ from its end
    chosen = [sized[i] for i in sorted({round(k * last / (PROBE_FRAGMENTS - 1)) for k in range(PROBE_FRAGMENTS)})]
    started = time.perf_counter()
    probes, probed = [], []
    for fragment in chosen:
        probes.append(probe_cache(fragment))
        probed.append(fragment)
        if time.perf_counter() - started >= seconds / 4:  # the epochs below take about 4x one pass
            break
    rows = sum(probe.rows for probe in probes)
    source_seconds = sum(probe.source_seconds for probe in probes)
    cache_seconds = max(sum(probe.read_seconds for probe in probes), 1e-9)
    speedup = source_seconds / cache_seconds
    epochs = _epochs_with_and_without_cache(dataset, probed, started + seconds)
    published = os.path.isfile(os.path.join(default_directory(), key_for(dataset.source), MANIFEST_NAME))
    measured = {
        "fragments": len(probes),
        "rows": rows,
        "source_seconds": source_seconds,
        "cache_read_seconds": cache_seconds,
        "cache_write_seconds": sum(probe.write_seconds for probe in probes),
        "source_seconds_per_million_rows": 1e6 * source_seconds / rows,
        "cache_seconds_per_million_rows": 1e6 * cache_seconds / rows,
        "read_speedup": speedup,
        **epochs,
        "auto_min_ratio": AUTO_MIN_RATIO,
        "published_cache": published,
    }
    name = source_format.upper() if source_format in ("csv", "json") else source_format
    per, unit, said = (1_000, "images", "1,000") if source_format == "images" else (1_000_000, "rows", "1 M")
    ratio = f"{speedup:,.1f}x less" if speedup >= 1 else f"{1 / speedup:,.1f}x more"
    costs = (
        f"reading {said} {unit} costs {per * source_seconds / rows:,.2f} s from the {name} source, "
        f"{per * cache_seconds / rows:,.2f} s from a cached copy ({ratio})"
    )
    gain = epochs["epoch_speedup"]
    on = f"measured on {len(probes)} fragment{'s' if len(probes) != 1 else ''}, {rows:,} {unit}"
    later = (
        f"later epochs {gain:,.1f}x as fast from the cache ({count(epochs['source_rows_per_second'])} -> "
        f"{count(epochs['cache_rows_per_second'])} {unit}/s; {on})"
    )
    if speedup < AUTO_MIN_RATIO or gain < CACHE_EPOCH_GAIN:
        return Finding("cache", False, f"no cache needed: {costs}; {later}", measured)
    first = epochs["first_epoch_rows_per_second"] / epochs["source_rows_per_second"]
    return Finding(
        "cache",
        True,
        f"{name} decode is the limit: {costs}; `.cache()` would make {later}; the first epoch, writing the copy, "
        f"ran at {first:.0%} of the plain speed",
        measured,
        ".cache() on the dataset (or .cache(mode='auto')): the first epoch writes the copy, later epochs and runs "
        "read it" + ("; a cache of this source is already published" if published else ""),
    )


def _epochs_with_and_without_cache(dataset: Any, fragments: list[Any], deadline: float) -> dict[str, float]:
    """Rows/s of whole epochs over ``fragments``: from the source, writing a cache, and from the cache.

    The epochs from the source and from the cache alternate (each at least
    once) until ``deadline``, so that a load change on a shared machine
    falls on both.
    """
    import tempfile

    from ..diagnostics import bench

    subset = dataset.with_source(SubsetSource(dataset.source, fragments))
    batches = subset.num_batches()
    totals = {"source": [0, 0.0], "cache": [0, 0.0]}

    def timed(which: str, data: Any) -> float:
        report = bench(data, seconds=0, max_batches=batches)
        totals[which][0] += report.rows
        totals[which][1] += report.seconds
        return report.rows_per_second

    with tempfile.TemporaryDirectory(prefix="streamfeed-doctor-cache-") as directory:
        cached = subset.cache(directory)
        timed("source", subset)
        first = bench(cached, seconds=0, max_batches=batches).rows_per_second  # writes the parts
        timed("cache", cached)
        while time.perf_counter() < deadline:
            timed("source", subset)
            timed("cache", cached)
    source = totals["source"][0] / max(totals["source"][1], 1e-9)
    cache = totals["cache"][0] / max(totals["cache"][1], 1e-9)
    return {
        "epoch_rows": int(subset.num_rows()),
        "source_rows_per_second": source,
        "cache_rows_per_second": cache,
        "first_epoch_rows_per_second": first,
        "epoch_speedup": cache / max(source, 1e-9),
    }
