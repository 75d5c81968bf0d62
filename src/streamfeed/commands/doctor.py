"""``streamfeed doctor``: run the pipeline briefly on real data and say what would repair it, each finding measured.

Three measurements share the ``--seconds`` budget (default 10 s):

1. the pipeline itself, shuffled and batched as training reads it, with
   stage metrics on (``diagnostics.bench``): rows/s, read threads and how
   busy they were, the stage that sets the pace, the buffers against the
   memory limit (``_tuning_finding``: the one place that will ask the
   run-time autotuner once it exists);
2. the conversion cache's own measurement (``caching.probe_cache``, what
   ``cache(mode="auto")`` decides from), repeated on up to three fragments
   spread over the data: reading the rows from the source against reading
   the same rows back from a cache part; then whole epochs of the same
   pipeline over those fragments, from the source and from a cache of
   them in a temporary directory;
3. the quality pass of ``inspect --quality`` (nulls, duplicates, row order,
   constant columns, label imbalance; for images blur, exposure,
   undecodable files, size and mode outliers, duplicate files) on as many
   rows or images as the remaining time allows.

Label noise is not estimated: it needs a model trained for some epochs
(``keras.DataQualityMonitor`` during ``fit``), which is not a few seconds'
work on data alone. A source the pipeline cannot read (a null under the
default ``--nulls raise``, a corrupt file) fails as every command fails:
the error with its fix, exit code 1; a wrong path or flag exits with 2.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import textwrap
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import ArgumentError, MemoryLimitError, describe
from ..sources.subset import SubsetSource
from ._options import DEFAULT_BATCH_SIZE, add_format, add_memory_limit, add_reading, batched, names, open_dataset

PIPELINE_SHARE, CACHE_SHARE = 0.4, 0.3  # of --seconds; the quality pass has the rest
# A cache is suggested when later epochs measured at least this much faster. Not less: a Parquet file written with
# pyarrow's defaults (dictionary pages) read 1.1-1.6x faster per epoch from the cache's plain pages (4 runs of
# 60,000 rows, and the demo's data), a gain within this shared machine's noise, against 4.5-5.3x for CSV rows.
CACHE_EPOCH_GAIN = 2.0
PROBE_FRAGMENTS = 3  # fragments the cache measurement reads, spread over the data
MORE_THREADS_BUSY = 0.7  # a read pool busier than this share of its threads' time would use more (bench's rule)
# The quality pass measures at least this many images (rows), whatever the budget, and learns from their time
# how many more the budget allows: fewer would make its shares (blurry, null, duplicate) mostly noise.
MIN_IMAGES = 64
MIN_ROWS = 65_536
MIB = 2**20
WIDTH = 118  # the text report's lines, wrapped under their finding


@dataclass
class Finding:
    """One thing the doctor measured: whether it needs repair, what was measured, and the repair."""

    kind: str  # "pipeline", "cache", "nulls", "duplicates", "row_order", "constant", "imbalance", "blur", ...
    repair: bool
    summary: str
    measured: dict[str, Any] = field(default_factory=dict)
    action: str | None = None


def register(commands: argparse._SubParsersAction) -> None:
    doctor = commands.add_parser(
        "doctor", help="run a pipeline briefly on real data and say what would repair it (measured)"
    )
    doctor.add_argument("path", help="file, directory or glob")
    add_format(doctor)
    doctor.add_argument("--seconds", type=float, default=10.0, help="about how long to measure, in all (default 10)")
    doctor.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help=f"rows per batch (default {DEFAULT_BATCH_SIZE:,}, or fewer if they do not fit --memory-limit: images)",
    )
    doctor.add_argument("--read-threads", type=int, default=None, help="read threads (default: min(4, CPUs))")
    doctor.add_argument("--label", default=None, help="label column: its class balance is checked")
    add_memory_limit(doctor)
    add_reading(doctor)
    doctor.add_argument("--json", action="store_true", help="print the findings as JSON (the whole of stdout)")
    doctor.add_argument("--quiet", action="store_true", help="no progress bars")
    doctor.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if not args.seconds > 0:
        raise ArgumentError(describe("--seconds must be positive", found=str(args.seconds), fix="pass --seconds 10"))
    started = time.perf_counter()
    args.given_format = args.format  # open_dataset sets args.format to the detected one
    named = {"--columns": names(args.columns), "--label": [args.label] if args.label else []}
    read = list(dict.fromkeys(sum(named.values(), []))) if named["--columns"] else None
    source_format, dataset = open_dataset(args, args.path, read=read, named=named)
    dataset = dataset.shuffle(seed=0).with_options(memory_limit=args.memory_limit, read_threads=args.read_threads)
    dataset = batched(dataset, args.batch_size, command="doctor")
    progress = False if args.json else None
    budget = args.seconds
    findings = []
    findings.append(_tuning_finding(dataset, PIPELINE_SHARE * budget, progress=progress))
    findings.append(_cache_finding(dataset, source_format, CACHE_SHARE * budget))
    remaining = budget - (time.perf_counter() - started)
    findings += _quality_findings(args, dataset, source_format, max(remaining, 0.1 * budget), progress=progress)
    fragments = dataset.source.fragments
    result = {
        "data": args.path,
        "format": source_format,
        "files": len(dataset.source.files),
        "rows": int(sum(fragment.num_rows for fragment in fragments)),
        "rows_exact": bool(dataset.source.exact_counts),
        "seconds": time.perf_counter() - started,
        "findings": [asdict(finding) for finding in findings],
        "repairs": sum(finding.repair for finding in findings),
    }
    if args.json:
        print(json.dumps(result, default=_jsonable), file=args.out)
    else:
        print(render(result), file=args.out)
    return 0


def _jsonable(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else str(value)


# ------------------------------------------------------------------------ the pipeline
def _tuning_finding(dataset: Any, seconds: float, *, progress: bool | None = False) -> Finding:
    """The pipeline's throughput and settings from a short measured run with autotuning, and what to tune.

    The run is ``bench``'s (stage metrics on, batches drained as fast as
    possible) with the run-time autotuner on (``runtime/autotune.py``): when
    it moved a setting within the memory limit, the finding says which and
    why, and the repair is to train with it. Otherwise the repair suggested
    is the one setting the run measures the need for: more read threads,
    when the read pool is the limit, busy above ``MORE_THREADS_BUSY``, fewer
    threads than cores run, and the layout with one per core still fits the
    memory limit. A user's explicit ``--read-threads`` is kept (no tuning).
    """
    from ..diagnostics import bench

    tuned = dataset if dataset.read_threads else dataset.with_options(autotune=True)
    report = bench(tuned, seconds=seconds, progress=progress)
    tuning = tuned.autotune.report() if tuned.autotune is not None else None
    threads, cores, busy = report.read_threads, report.cpu_count, report.utilisation["read_pool"]
    measured = {
        "rows_per_second": report.rows_per_second,
        "rows": report.rows,
        "seconds": report.seconds,
        "read_threads": threads,
        "cpu_count": cores,
        "read_pool_busy": busy,
        "producer_busy": report.utilisation["producer"],
        "bottleneck": report.bottleneck,
        "verdict": report.verdict,
        "estimated_bytes": report.layout.get("estimated_bytes", 0),
        "memory_limit_bytes": report.memory_limit_bytes,
        "peak_rss_bytes": report.peak_rss_bytes,
        "layout": report.layout,
    }
    summary = (
        f"the pipeline delivers {_count(report.rows_per_second)} rows/s with {threads} read thread"
        f"{'s' if threads != 1 else ''} ({cores} cores); read threads busy {busy:.0%}: {_bound(report)}; "
        f"buffers {report.layout.get('estimated_bytes', 0) / MIB:,.0f} MiB of the "
        f"{report.memory_limit_bytes / MIB:,.0f} MiB memory limit"
    )
    if tuning is not None:
        measured["autotune"] = tuning.to_dict()
        if reads_retuned(tuning):
            return Finding(
                "pipeline",
                True,
                f"{summary}; autotuning changed {tuning.summary()}",
                measured,
                "train with with_options(autotune=True), or fix the settings it reached: "
                f"with_options(read_threads={tuning.final.read_threads}) and prefetch({tuning.final.prefetch})",
            )
        if tuning.final != tuning.initial:
            summary = f"{summary}; autotuning deepened the prefetch queue only ({tuning.summary()})"
    if report.bottleneck == "read" and busy > MORE_THREADS_BUSY and threads < cores:
        try:
            wider = dataset.with_options(read_threads=cores).layout()
        except MemoryLimitError:
            wider = None
        if wider is not None:
            measured["suggested_read_threads"] = cores
            measured["suggested_estimated_bytes"] = wider.estimated_bytes
            return Finding(
                "pipeline",
                True,
                summary,
                measured,
                f"read with {cores} threads: --read-threads {cores} (with_options(read_threads={cores})); "
                f"its buffers, about {wider.estimated_bytes / MIB:,.0f} MiB, fit the memory limit",
            )
    return Finding("pipeline", False, summary, measured)


def reads_retuned(tuning: Any) -> bool:
    """Whether autotuning moved the reads (threads or read-ahead): the settings the doctor offers as a repair.

    A deeper prefetch queue alone is not: ``bench`` drains batches as fast
    as they come, so its consumer always waits, and a shuffle served unit by
    unit makes the batch rate of two intervals differ by bursts.
    """
    moved = ("read_threads", "read_ahead")
    return any(getattr(tuning.final, name) != getattr(tuning.initial, name) for name in moved)


def _bound(report: Any) -> str:
    """What sets the pipeline's pace, in two words."""
    if report.bottleneck == "read":  # bench's disk-or-CPU call misses decoders' own threads (pyarrow's CSV)
        return "read-bound"
    return {"assemble": "shuffle-bound", "batch": "batching-bound"}.get(report.bottleneck, report.verdict)


# ------------------------------------------------------------------------ the cache
def _cache_finding(dataset: Any, source_format: str, seconds: float) -> Finding:
    """The cache's two measurements, on up to :data:`PROBE_FRAGMENTS` fragments spread over the data.

    Per row: ``caching.probe_cache`` (what ``cache(mode="auto")`` decides
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
    from ..cache.store import AUTO_MIN_RATIO, cache_key, default_directory, probe_cache
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
    published = os.path.isfile(os.path.join(default_directory(), cache_key(dataset.source), MANIFEST_NAME))
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
        f"later epochs {gain:,.1f}x as fast from the cache ({_count(epochs['source_rows_per_second'])} -> "
        f"{_count(epochs['cache_rows_per_second'])} {unit}/s; {on})"
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


# ------------------------------------------------------------------------ data quality
def _quality_findings(
    args: argparse.Namespace, dataset: Any, source_format: str, seconds: float, *, progress: bool | None
) -> list[Finding]:
    """The ``inspect --quality`` report on as many rows (images) as ``seconds`` allows, one finding per problem."""
    more = "streamfeed inspect " + shlex.quote(args.path) + (f" --format {source_format}" if args.given_format else "")
    more += " --quality" + (f" --label {shlex.quote(args.label)}" if args.label else "")
    if source_format == "images":
        files = list(dataset.source.files)
        report, measured = _sampled(
            lambda count: _image_report(files, count, progress), len(files), MIN_IMAGES, seconds
        )
        found = _image_findings(report, measured, more + " --html report.html")
        clean = "no blurry, nearly black or white, undecodable, odd-sized or duplicate images"
        return found or [Finding("quality", False, f"{clean} in {measured['scanned']:,} of {len(files):,}", measured)]
    from ..inspect.quality import quality_report

    def tabular(rows: int) -> Any:
        return quality_report(args.path, format=source_format, label=args.label, max_rows=rows, progress_bar=progress)

    total = int(sum(fragment.num_rows for fragment in dataset.source.fragments))
    report, measured = _sampled(tabular, total, MIN_ROWS, seconds)
    found = _tabular_findings(report, measured, more, _index_columns(dataset))
    clean = "no missing values, duplicate rows, sorted or constant columns" + (", label balanced" if args.label else "")
    return found or [Finding("quality", False, f"{clean} in {measured['scanned']:,} of {total:,} rows", measured)]


def _image_report(files: list[str], count: int, progress: bool | None) -> Any:
    from ..inspect.image_quality import image_quality

    if count < len(files):  # evenly spread over the listing (sorted by class), not its first classes
        files = [files[int(i * len(files) / count)] for i in range(count)]
    return image_quality(files, progress_bar=progress)


def _sampled(measure: Any, total: int, least: int, seconds: float) -> tuple[Any, dict[str, Any]]:
    """``measure(n)`` on ``least`` items, then, if the rest of ``seconds`` allows more at that rate, on more."""
    started = time.perf_counter()
    count = min(total, least)
    report = measure(count)
    elapsed = time.perf_counter() - started
    if count < total:
        affordable = int(count * (seconds - elapsed) / max(elapsed, 1e-9))
        if affordable > 2 * count:  # measuring again repeats the first part: only worth it for many more
            count = min(total, affordable)
            report = measure(count)
    return report, {"scanned": count, "of": total}


def _scope(measured: dict[str, Any]) -> str:
    return "" if measured["scanned"] >= measured["of"] else f" (first {measured['scanned']:,} of {measured['of']:,})"


def _index_columns(dataset: Any) -> list[str]:
    """Columns like a row index: ``inspect``'s rule (named like one, or 0, 1, 2, ... in the first fragment)."""
    from ..inspect.report import index_like

    first = next((fragment for fragment in dataset.source.fragments if fragment.num_rows > 0), None)
    head = first.read() if first is not None else {}
    return [name for name in dataset.source.column_names if index_like(name, head.get(name))]


def _tabular_findings(report: Any, sample: dict[str, Any], more: str, index: list[str]) -> list[Finding]:
    """One finding per kind of problem; ``index``: row-index columns, which follow the row order by nature."""
    from ..inspect.quality import HLL_LG_K, ORDER_THRESHOLD

    findings = []
    scope = _scope(sample)
    rows = report.rows
    flawed = {
        name: {kind: column[kind] for kind in ("null_rate", "nan_rate", "inf_rate") if column[kind] > 0}
        for name, column in report.columns.items()
    }
    flawed = {name: rates for name, rates in flawed.items() if rates}
    if flawed:
        parts = [
            f"{name!r} " + ", ".join(f"{rate:.2%} {kind.split('_')[0]}" for kind, rate in rates.items())
            for name, rates in flawed.items()
        ]
        findings.append(
            Finding(
                "nulls",
                True,
                f"{len(flawed)} column(s) with missing values{scope}: "
                + "; ".join(parts[:4])
                + (f"; and {len(parts) - 4} more" if len(parts) > 4 else ""),
                {"rows": rows, **sample, "columns": flawed},
                f"--nulls drop or --fill VALUE (read_*(nulls='drop' | 'fill')); see: {more}",
            )
        )
    duplicates = report.duplicates or {}
    # The sketch's 95 % range can miss 0 on unique rows (932 "duplicates" of 65,536 unique demo rows): a share
    # is reported only beyond 3 relative standard errors of the sketch.
    noise = 3 * 1.04 / math.sqrt(2**HLL_LG_K) * rows
    if duplicates.get("range_95", [0])[0] > 0 and (duplicates.get("estimated") or 0) > noise:
        findings.append(
            Finding(
                "duplicates",
                True,
                f"duplicate rows{scope}: {duplicates['headline']}",
                {"rows": rows, **sample, "estimated": duplicates["estimated"], "range_95": duplicates["range_95"]},
                f"drop them when writing the data; see: {more}",
            )
        )
    ordered = {name: rho for name, rho in report.row_order.items() if abs(rho) >= ORDER_THRESHOLD and name not in index}
    if ordered:
        timed = [name for name in ordered if report.columns.get(name, {}).get("datetime")]
        name = timed[0] if timed else max(ordered, key=lambda key: abs(ordered[key]))
        what = "time-sorted" if timed else "sorted"
        findings.append(
            Finding(
                "row_order",
                True,
                f"the data is {what}{scope}: column {name!r} follows the row order (Spearman rho "
                f"{ordered[name]:+.2f})" + (f", and {len(ordered) - 1} more column(s)" if len(ordered) > 1 else ""),
                {"rows": rows, **sample, "spearman_rho": ordered, "threshold": ORDER_THRESHOLD},
                "shuffle when training (.shuffle(seed=...) mixes rows within windows of fragments), or "
                f"rewrite the data shuffled (streamfeed convert); see: {more}",
            )
        )
    if index:
        findings.append(
            Finding(
                "index_column",
                True,
                f"{', '.join(map(repr, index))}: like a row index "
                "(named like one, or counting 0, 1, 2, ... in the first fragment)",
                {"columns": index},
                "leave it out of the model's inputs (to_keras(features=[...]), --columns): "
                f"a model can learn the row order from it; see: {more}",
            )
        )
    constant = [name for name, column in report.columns.items() if column["constant"]]
    if constant:
        findings.append(
            Finding(
                "constant",
                True,
                f"{len(constant)} constant column(s){scope}: {', '.join(map(repr, constant[:6]))}",
                {"rows": rows, **sample, "columns": constant},
                f"leave them out (--columns / columns=[...]); see: {more}",
            )
        )
    ratio = (report.label or {}).get("imbalance_ratio")
    if ratio is not None and ratio >= 10:
        findings.append(
            Finding(
                "imbalance",
                True,
                f"the label is imbalanced{scope}: the largest class has {ratio:.0f}x the rows of the smallest",
                {"rows": rows, **sample, "imbalance_ratio": ratio},
                f"class weights or balance() (streamfeed stats --label ... gives the counts); see: {more}",
            )
        )
    return findings


def _image_findings(report: Any, sample: dict[str, Any], more: str) -> list[Finding]:
    images = report.images or {}
    scope = "" if sample["scanned"] >= sample["of"] else f" ({sample['scanned']:,} of {sample['of']:,} images)"
    measured = {**sample, "median_blur": images.get("blur", {}).get("median", 0.0)}
    findings = []
    blurry = images.get("blur", {}).get("blurry", [])
    if blurry:
        findings.append(
            Finding(
                "blur",
                True,
                f"{len(blurry)} image(s) much blurrier than the median{scope} (variance of the Laplacian below "
                f"10% of {measured['median_blur']:,.0f}), e.g. {blurry[0]['path']}",
                {**measured, "blurry": len(blurry), "examples": [entry["path"] for entry in blurry[:5]]},
                f"look at them and drop or refile them; see: {more}",
            )
        )
    dark, bright = images.get("near_black", []), images.get("near_white", [])
    if dark or bright:
        findings.append(
            Finding(
                "exposure",
                True,
                f"{len(dark)} nearly black and {len(bright)} nearly white image(s){scope}, e.g. {(dark or bright)[0]}",
                {**measured, "near_black": len(dark), "near_white": len(bright), "examples": (dark + bright)[:5]},
                f"look at them and drop them if they carry nothing; see: {more}",
            )
        )
    for kind, key, text, action in (
        ("undecodable", "undecodable", "do not decode", "--on-error skip (on_error='skip') skips and reports them"),
        ("image_size", "size_outliers", "are less than half or more than twice the median size", "check them"),
        ("image_mode", "mode_outliers", "have another colour mode than most", "check them"),
    ):
        found = images.get(key, [])
        if found:
            example = found[0]["path"] if isinstance(found[0], dict) else found[0]
            findings.append(
                Finding(
                    kind,
                    True,
                    f"{len(found)} image(s) {text}{scope}, e.g. {example}",
                    {**measured, "count": len(found)},
                    f"{action}; see: {more}",
                )
            )
    duplicates = report.duplicates or {}
    if duplicates.get("estimated"):
        findings.append(
            Finding(
                "duplicates",
                True,
                f"{duplicates['estimated']} duplicate file(s){scope} in {len(duplicates['groups'])} group(s)",
                {**measured, "duplicates": duplicates["estimated"]},
                f"keep one of each; see: {more}",
            )
        )
    return findings


# ------------------------------------------------------------------------ output
def _count(value: float) -> str:
    """840 k, 1.2 M, 1 M: a number said the way people say it."""
    if value >= 1e6:
        return f"{value / 1e6:,.{0 if value % 1e6 == 0 else 1}f} M"
    if value >= 1e3:
        return f"{value / 1e3:,.0f} k"
    return f"{value:,.0f}"


def render(result: dict[str, Any]) -> str:
    """The findings as lines: ``repair`` or ``ok``, the kind, what was measured, and the repair under it."""
    rows = f"{result['rows']:,}" if result["rows_exact"] else f"about {result['rows']:,}"
    files = f"{result['files']:,} file{'s' if result['files'] != 1 else ''}"
    lines = [
        f"streamfeed doctor  {result['data']}: {result['format']}, {files}, {rows} rows; "
        f"measured for {result['seconds']:,.1f} s"
    ]
    indent = " " * 23
    wrap: dict[str, Any] = {"width": WIDTH, "break_on_hyphens": False, "break_long_words": False}
    for finding in result["findings"]:
        head = f"  {'repair' if finding['repair'] else 'ok':<7}{finding['kind']:<14}"
        lines.append(textwrap.fill(finding["summary"], initial_indent=head, subsequent_indent=indent, **wrap))
        if finding["action"]:
            lines.append(
                textwrap.fill(
                    finding["action"], initial_indent=indent + "-> ", subsequent_indent=indent + "   ", **wrap
                )
            )
    repairs = result["repairs"]
    lines.append("nothing to repair" if not repairs else f"{repairs} thing{'s' if repairs != 1 else ''} to repair")
    return "\n".join(lines)
