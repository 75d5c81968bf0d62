"""``streamfeed doctor``'s third measurement: the data's quality, on as many rows or images as the time allows.

The pass of ``inspect --quality`` (``inspect.quality.quality_report``, and
``inspect.image_quality.image_quality`` for an image folder or a zip
archive of one) on at least
``MIN_ROWS`` rows (``MIN_IMAGES`` images), then on more if the rest of the
budget allows at the measured rate; its report becomes one finding per kind
of problem (nulls, duplicates, row order, a row-index column, constant
columns, label imbalance; blur, exposure, undecodable files, size and mode
outliers, duplicate files), each pointing to the ``inspect`` command that
shows more. Its own module because these findings only read the quality
report, not the pipeline: the thresholds that make a share a finding live
here.
"""

from __future__ import annotations

import math
import shlex
import time
from typing import Any

from ._options import IMAGE_FORMATS
from .doctor_findings import Finding

# The quality pass measures at least this many images (rows), whatever the budget, and learns from their time
# how many more the budget allows: fewer would make its shares (blurry, null, duplicate) mostly noise.
MIN_IMAGES = 64
MIN_ROWS = 65_536


def quality_findings(
    dataset: Any,
    path: str,
    source_format: str,
    seconds: float,
    *,
    label: str | None,
    format_given: bool,
    progress: bool | None,
) -> list[Finding]:
    """The ``inspect --quality`` report on as many rows (images) as ``seconds`` allows, one finding per problem.

    ``path`` and ``label`` are the command's; ``format_given``: whether the
    user named the format (``--format``), so that the ``inspect`` command
    each finding points to names it too.
    """
    more = "streamfeed inspect " + shlex.quote(path) + (f" --format {source_format}" if format_given else "")
    more += " --quality" + (f" --label {shlex.quote(label)}" if label else "")
    if source_format in IMAGE_FORMATS:
        from ..inspect.image_files import archive_files
        from ..sources.zip import ZipImageSource

        source = dataset.source  # a zip archive's members are opened one at a time through their listing
        listing = archive_files(source) if isinstance(source, ZipImageSource) else None
        files = listing.files if listing is not None else list(source.files)
        report, measured = _sampled(
            lambda count: _image_report(files, count, progress, listing), len(files), MIN_IMAGES, seconds
        )
        found = _image_findings(report, measured, more + " --html report.html")
        clean = "no blurry, nearly black or white, undecodable, odd-sized or duplicate images"
        return found or [Finding("quality", False, f"{clean} in {measured['scanned']:,} of {len(files):,}", measured)]
    from ..inspect.quality import quality_report

    def tabular(rows: int) -> Any:
        return quality_report(path, format=source_format, label=label, max_rows=rows, progress_bar=progress)

    total = int(sum(fragment.num_rows for fragment in dataset.source.fragments))
    report, measured = _sampled(tabular, total, MIN_ROWS, seconds)
    found = _tabular_findings(report, measured, more, _index_columns(dataset))
    clean = "no missing values, duplicate rows, sorted or constant columns" + (", label balanced" if label else "")
    return found or [Finding("quality", False, f"{clean} in {measured['scanned']:,} of {total:,} rows", measured)]


def _image_report(files: list[str], count: int, progress: bool | None, listing: Any = None) -> Any:
    """The image quality report of ``count`` of ``files`` spread evenly; ``listing``: their ``ImageFiles``."""
    from ..inspect.image_quality import image_quality

    if count < len(files):  # evenly spread over the listing (sorted by class), not its first classes
        files = [files[int(i * len(files) / count)] for i in range(count)]
    return image_quality(files, progress_bar=progress, files_of=listing)


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
    dark, bright = images.get("near_black", []), images.get("near_white", [])  # examples
    counts = images.get("counts", {})  # of every image
    if dark or bright:
        findings.append(
            Finding(
                "exposure",
                True,
                f"{counts.get('near_black', len(dark))} nearly black and {counts.get('near_white', len(bright))} "
                f"nearly white image(s){scope}, e.g. {(dark or bright)[0]}",
                {
                    **measured,
                    "near_black": counts.get("near_black", len(dark)),
                    "near_white": counts.get("near_white", len(bright)),
                    "examples": (dark + bright)[:5],
                },
                f"look at them and drop them if they carry nothing; see: {more}",
            )
        )
    for kind, key, text, action in (
        ("undecodable", "undecodable", "do not decode", "--on-error skip (on_error='skip') skips and reports them"),
        ("image_size", "size_outliers", "are less than half or more than twice the median size", "check them"),
        ("image_mode", "mode_outliers", "have another colour mode than most", "check them"),
    ):
        found = images.get(key, [])
        count = images.get("counts", {}).get(key, len(found))  # of every image; ``found`` holds examples
        if found:
            example = found[0]["path"] if isinstance(found[0], dict) else found[0]
            findings.append(
                Finding(
                    kind,
                    True,
                    f"{count} image(s) {text}{scope}, e.g. {example}",
                    {**measured, "count": count},
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
