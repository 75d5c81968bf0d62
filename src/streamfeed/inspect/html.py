"""The inspect report as one static HTML page, for people who would rather look than read.

What it shows: a header of key figures and every warning; for tables, one
card per column (a histogram for numbers and dates, the most frequent
values for the rest, thumbnails and the pixel histogram for a column of
pictures, its nulls and NaN, and its median along the row order with
Spearman's rho), the missing values of every column side by side, the
label's distribution, each column's correlation with the row order, and
the rows per row group (fragment); for image folders, the images per
class with a few thumbnails of each, and with ``--quality`` the darkest,
brightest and blurriest images, the duplicate groups, and the brightness
and blur distributions; then the file and image sizes and every fact of
the report in tables.

Self-contained: charts are inline SVG (drawn by :mod:`.svg`) and thumbnails
inline base64 JPEG (:mod:`.figures` computes both from a bounded sample);
this module only lays out the sections around them. No script, font,
style sheet or image is fetched, so the page opens anywhere (attach it to
a ticket). Every name from the data is escaped, control characters shown
as ``\\xNN``.
"""

from __future__ import annotations

import math
import os
from typing import Any

from ..files.atomic import write_atomic
from .figures import ColumnFigure, Figures, compute_figures
from .html_base import STYLE, count_text, html_table
from .html_images import image_sections, thumb_figure
from .image_files import IMAGE_FORMATS
from .report import InspectReport, human_size
from .svg import (
    BLUE,
    ORANGE,
    ORDER_THRESHOLD,
    PURPLE,
    RED,
    bar_chart,
    binned,
    histogram_svg,
    missing_svg,
    null_strip,
    order_svg,
    rho_svg,
)
from .svg import escape as _e  # short: every f-string below escapes its data through it

__all__ = ["html_table", "page_warnings", "thumb_figure", "to_html", "write_html"]


# ------------------------------------------------------------------------------------------------ text
def _float(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


# ------------------------------------------------------------------------------------------------ parts
def _tiles(report: InspectReport, figures: Figures, warnings: int) -> str:
    rows = "unknown" if report.rows is None else ("" if report.rows_exact else "≈") + f"{report.rows:,}"
    tiles = [
        ("format", report.format),
        ("files", f"{report.file_count:,}"),
        ("on disk", human_size(report.total_bytes)),
        ("images" if report.format in IMAGE_FORMATS else "rows", rows),
    ]
    if report.format in IMAGE_FORMATS:
        labelled = [name for name in figures.class_counts if name != "(no class)"]
        tiles.append(("classes", f"{len(labelled):,}"))
    else:
        tiles.append(("columns", f"{len(report.columns):,}"))
    quality = report.quality or {}
    duplicates = (quality.get("duplicates") or {}).get("estimated")
    if duplicates is not None:
        tiles.append(("duplicates", f"{duplicates:,}"))
    out = [f'<div class="tile"><b>{_e(value)}</b><span>{_e(name)}</span></div>' for name, value in tiles]
    out.append(f'<div class="tile{" bad" if warnings else ""}"><b>{warnings}</b><span>warnings</span></div>')
    return '<div class="tiles">' + "".join(out) + "</div>"


def _row_order_rho(figure: ColumnFigure, report: InspectReport) -> float | None:
    """The rho a column's card shows: the quality pass's (all rows) when it measured the column, else the sample's."""
    rho = _float((report.quality or {}).get("row_order", {}).get(figure.name))
    return figure.rho if rho is None else rho


def page_warnings(report: InspectReport, figures: Figures) -> list[tuple[str, str]]:
    """Every warning the page shows, as (code, message): the summary counts exactly these.

    The report's and the quality pass's, and one for each column its card
    flags "sorted?" from the sample alone (the quality pass, when it ran,
    warns about the columns it measured itself).
    """
    quality = report.quality or {}
    items = [(w.code, w.message) for w in report.warnings] + [("quality", w) for w in quality.get("warnings", [])]
    measured = quality.get("row_order") or {}
    for figure in figures.columns:
        rho = _row_order_rho(figure, report)
        if figure.order and figure.name not in measured and rho is not None and abs(rho) >= ORDER_THRESHOLD:
            items.append(
                (
                    "row_order",
                    f"column {figure.name!r} follows the row order in the sample (Spearman rho {rho:+.2f}): the "
                    "data looks sorted; shuffle it (.shuffle(seed=...)) or rewrite it shuffled",
                )
            )
    return items


def _warnings(warnings: list[tuple[str, str]]) -> str:
    items = [f'<div class="warn"><code>{_e(code)}</code>{_e(message)}</div>' for code, message in warnings]
    if not items:
        return '<section id="warnings"><h2>Warnings</h2><p class="ok">No warnings.</p></section>'
    return f'<section id="warnings"><h2>Warnings ({len(items)})</h2>{"".join(items)}</section>'


def _column_card(figure: ColumnFigure, report: InspectReport, label: str | None, read: str = "") -> str:
    """One column's card; ``read`` is how much of the source the sample read ("5 of 7 row groups"), when not all."""
    quality = (report.quality or {}).get("columns", {}).get(figure.name)
    rows = max(figure.rows, 1)
    if quality:
        null, nan = quality["null_rate"], quality["nan_rate"]
        where = "all rows"
    else:
        null, nan = figure.nulls / rows, figure.nans / rows
        where = "sample"
    badges = f'<span class="badge">{_e(figure.dtype)}</span>'
    if figure.name == label:
        badges += '<span class="badge label">label</span>'
    missing = [f"null {null:.1%}" if null else "no nulls", f"NaN {nan:.1%}" if nan else ""]
    if quality and quality.get("constant"):
        missing.append("constant")
    facts = [] if figure.distinct is None else [f"{figure.distinct:,} distinct"]
    if figure.stats:
        facts.append(f"min {figure.stats['min']} · median {figure.stats['median']} · max {figure.stats['max']}")
    parts = [
        f'<div class="card column" data-column="{_e(figure.name)}" data-kind="{figure.kind}">',
        f"<h3>{_e(figure.name)}{badges}</h3>",
        f'<p class="meta">{_e(" · ".join(fact for fact in missing if fact))} ({where})'
        + (f"<br>{_e(' · '.join(facts))}" if facts else "")
        + "</p>",
        null_strip(figure.name, null, nan),
    ]
    if figure.kind == "image":
        parts.append(f'<div class="thumbs">{"".join(thumb_figure(t, "array-thumb") for t in figure.thumbs)}</div>')
        parts.append(f'<p class="meta">pixel values of the sample{" (0–255)" if "uint8" in figure.dtype else ""}</p>')
        parts.append(histogram_svg(figure))
    elif figure.kind in ("numeric", "datetime"):
        parts.append(histogram_svg(figure))
        empty = sum(1 for count in figure.counts[1:-1] if not count)
        if read and empty:  # a sorted column shows the fragments between those read as empty bins
            parts.append(
                f'<p class="note">{_e(count_text(empty, "empty bin"))}: the sample reads {_e(read)}, so an empty '
                "bin can be rows it did not read</p>"
            )
        low, high = figure.outside
        if low or high:
            parts.append(f'<p class="note">range cut to the 1st–99th percentile: {low:,} below, {high:,} above</p>')
    elif figure.top:
        labels = [value for value, _ in figure.top] + (["(other values)"] if figure.other else [])
        counts = [count for _, count in figure.top] + ([figure.other] if figure.other else [])
        parts.append(bar_chart("", labels, counts, kind="topk", total=sum(counts) or None, name=figure.name))
    else:
        parts.append('<p class="note">values are arrays: no chart</p>')
    if figure.order:
        rho = _row_order_rho(figure, report)
        flag = ' <b style="color:#b42318">sorted?</b>' if rho is not None and abs(rho) >= ORDER_THRESHOLD else ""
        what = "mean" if figure.kind in ("discrete", "bool") else "median, 10–90 % band"
        parts.append(f'<p class="meta">row order: {what} · rho {rho or 0:+.2f}{flag}</p>')
        parts.append(order_svg(figure))
    parts.append("</div>")
    return "".join(parts)


def _tabular_sections(report: InspectReport, figures: Figures) -> list[str]:
    parts: list[str] = []
    quality = report.quality or {}
    label = (quality.get("label") or {}).get("column")
    if figures.columns:
        sample = (
            f"from a sample of {figures.sample_rows:,} of {figures.total_rows:,} rows"
            if figures.total_rows and figures.sample_rows < figures.total_rows
            else f"from all {figures.sample_rows:,} rows"
        )
        noun = "row groups" if report.format == "parquet" else "fragments"
        pieces = "pieces (the fragments cut finer for the sample)" if figures.cut_finer else noun
        read = (
            f"{figures.fragments_read:,} of {figures.fragment_count:,} {pieces}"
            if figures.fragments_read < figures.fragment_count
            else ""
        )
        spread = f", taken evenly from {read}" if read else ""
        more = f"; {figures.more_columns:,} more columns are listed under All facts" if figures.more_columns else ""
        legend = (
            f'<span class="legend"><i style="background:{BLUE}"></i>present<i style="background:{ORANGE}"></i>null'
            f'<i style="background:{RED}"></i>NaN</span>'
        )
        parts.append(
            f'<section id="columns"><h2>Columns</h2><p class="note">Figures {_e(sample + spread + more)}. '
            f"Rates marked “all rows” come from the quality pass. {legend}</p>"
            f'<div class="grid">{"".join(_column_card(f, report, label, read) for f in figures.columns)}</div>'
            "</section>"
        )
    # missing values of every column, side by side
    if quality.get("columns"):
        entries = [(name, c["null_rate"], c["nan_rate"], c["inf_rate"]) for name, c in quality["columns"].items()]
        source = f"all {quality.get('rows', 0):,} rows (quality pass)"
    else:
        entries = [(f.name, f.nulls / max(f.rows, 1), f.nans / max(f.rows, 1), 0.0) for f in figures.columns]
        source = f"the sample of {figures.sample_rows:,} rows"
    charts = []
    entries, hidden = _most(entries, lambda entry: entry[1] + entry[2] + entry[3], "missing values")
    if entries:
        charts.append(
            f'<div class="card" id="missing"><h3>Missing values per column</h3><p class="meta">share of {_e(source)}'
            f' <span class="legend"><i style="background:{ORANGE}"></i>null<i style="background:{RED}"></i>NaN'
            f'<i style="background:{PURPLE}"></i>inf</span></p>{missing_svg(entries)}{hidden}</div>'
        )
    charts.append(_label_card(quality, figures))
    order = quality.get("row_order") or {}
    rhos = [(name, v) for name, value in order.items() if (v := _float(value)) is not None]
    where = "quality pass (thinned sample of all rows)"
    if not rhos:
        rhos = [(f.name, f.rho) for f in figures.columns if f.rho is not None]
        where = "the sample above"
    rhos, hidden = _most(rhos, lambda entry: abs(entry[1]), "|rho|")
    if rhos:
        charts.append(
            f'<div class="card" id="row-order"><h3>Correlation with the row order</h3><p class="meta">Spearman rho '
            f"of each column with the row number, from {_e(where)}; |rho| ≥ {ORDER_THRESHOLD} (shaded) means the "
            f"data is sorted by it: shuffle before training</p>{rho_svg(rhos)}{hidden}</div>"
        )
    charts.append(_fragment_card(report, figures))
    duplicates = quality.get("duplicates")
    if duplicates and "range_95" in duplicates:
        # The quality pass's headline: "none", "none detected (95 %: 0-k)" (no point estimate: it would be
        # noise) or "about n (share; 95 %: low-high)".
        charts.append(
            f'<div class="card" id="duplicates"><h3>Duplicate rows</h3><p><b>{_e(duplicates["headline"])}</b></p>'
            f'<p class="meta">{_e(duplicates["method"])}</p></div>'
        )
    if any(charts):
        parts.append(f'<section id="overview"><h2>Overview</h2><div class="wide">{"".join(charts)}</div></section>')
    return parts


def _most(entries: list, key: Any, what: str, limit: int = 30) -> tuple[list, str]:
    """At most ``limit`` entries: all in order, or those with the largest ``key`` (and a note saying so)."""
    if len(entries) <= limit:
        return entries, ""
    kept = set(sorted(range(len(entries)), key=lambda i: -key(entries[i]))[:limit])
    note = f'<p class="note">the {limit} of {len(entries):,} columns with the largest {what}</p>'
    return [entry for i, entry in enumerate(entries) if i in kept], note


def _label_card(quality: dict, figures: Figures) -> str:
    label = quality.get("label")
    if not label:
        if quality and quality.get("columns"):
            return (
                '<div class="card" id="label"><h3>Label</h3><p class="note">Pass --label COLUMN to see the '
                "label's distribution and imbalance.</p></div>"
            )
        return ""
    name = label.get("column")
    if "counts" in label:
        counts = label["counts"]
        shown = list(counts.items())[:20]
        rest = sum(list(counts.values())[20:])
        labels = [key for key, _ in shown] + ([f"({len(counts) - 20} more classes)"] if rest else [])
        values = [value for _, value in shown] + ([rest] if rest else [])
        return (
            f'<div class="card" id="label"><h3>Label {_e(name)} (imbalance ratio {label["imbalance_ratio"]:.1f})</h3>'
            f'<p class="meta">{count_text(len(counts), "class")}, all rows</p>'
            + bar_chart("", labels, values, kind="label", width=540, total=sum(counts.values()), name=str(name))
            + "</div>"
        )
    if label.get("kind") == "continuous":
        figure = next((f for f in figures.columns if f.name == name), None)
        chart = histogram_svg(figure, width=540) if figure is not None else ""
        return (
            f'<div class="card" id="label"><h3>Label {_e(name)} (continuous)</h3><p class="meta">mean '
            f"{label['mean']:.4g}, std {label['std']:.4g}, range {_e(label['min'])} to {_e(label['max'])}"
            f"{' (histogram from the sample)' if chart else ''}</p>{chart}</div>"
        )
    return f'<div class="card" id="label"><h3>Label {_e(name)}</h3><p>{_e(label.get("classes"))} classes</p></div>'


def _fragment_card(report: InspectReport, figures: Figures) -> str:
    rows = figures.fragment_rows
    if not rows:
        return ""
    noun = "row group" if report.format == "parquet" else "fragment"
    distinct = sorted(set(rows))
    if len(distinct) <= 12:  # one bar per size
        labels, counts = [f"{size:,}" for size in distinct], [rows.count(size) for size in distinct]
    else:
        figure = binned([float(r) for r in rows], 12, lambda v: f"{v:,.0f}")
        labels = [f"{low}–{high}" for low, high in zip(figure.edge_labels[:-1], figure.edge_labels[1:])]
        counts = figure.counts
    keep = [i for i, count in enumerate(counts) if count]
    plural = "" if len(rows) == 1 else "s"
    middle = sorted(rows)[len(rows) // 2]
    bytes_note = f", about {human_size(middle * figures.row_bytes)} decoded" if figures.row_bytes else ""
    return (
        f'<div class="card" id="fragments"><h3>Rows per {noun}</h3><p class="meta">{len(rows):,} {noun}{plural} · '
        f"min {min(rows):,} · median {middle:,}{_e(bytes_note)} · max {max(rows):,}</p>"
        f"{bar_chart('', [labels[i] + ' rows' for i in keep], [counts[i] for i in keep], kind='fragments', width=540)}"
        "</div>"
    )


def _size_section(report: InspectReport) -> str:
    cards = []
    shapes = report.details.get("image_sizes") or {}
    if shapes:
        shown = list(shapes.items())[:12]
        cards.append(
            '<div class="card"><h3>Image sizes (width x height, the most common)</h3>'
            f"{bar_chart('', [k for k, _ in shown], [v for _, v in shown], kind='image-sizes', width=540)}</div>"
        )
    if report.size_histogram:
        labels = [f"{human_size(row['low'])} – {human_size(row['high'])}" for row in report.size_histogram]
        cards.append(
            '<div class="card"><h3>File sizes</h3>'
            f"{bar_chart('', labels, [row['files'] for row in report.size_histogram], kind='file-sizes', width=540)}"
            "</div>"
        )
    return f'<section id="sizes"><h2>Sizes</h2><div class="wide">{"".join(cards)}</div></section>' if cards else ""


def _facts(report: InspectReport) -> str:
    data = report.to_dict()
    summary = [
        ("format", report.format),
        ("files", f"{report.file_count:,} ({report.total_bytes:,} bytes)"),
        ("rows", "unknown" if report.rows is None else f"{report.rows:,}"),
    ]
    parts = ['<section id="facts"><h2>All facts</h2><details><summary>Summary and details</summary>']
    parts.append(html_table(summary + [(key, value) for key, value in data["details"].items()]))
    parts.append("</details>")
    if data["columns"]:
        columns = [
            (c["name"], c["type"], c["shape"] or "", "?" if c["nulls"] is None else c["nulls"], c["samples"])
            for c in data["columns"]
        ]
        parts.append(
            "<details><summary>Columns with sample values</summary>"
            + html_table(columns, ["name", "type", "shape", "nulls", "samples"])
            + "</details>"
        )
    quality = report.quality or {}
    if quality.get("columns"):
        rows = [
            (
                name,
                f"{c['null_rate']:.2%}",
                f"{c['nan_rate']:.2%}",
                f"{c['inf_rate']:.2%}",
                "yes" if c["constant"] else "",
                quality["row_order"].get(name, ""),
            )
            for name, c in quality["columns"].items()
        ]
        parts.append(
            "<details><summary>Quality per column</summary>"
            + html_table(rows, ["column", "null", "NaN", "inf", "constant", "row-order rho"])
            + "</details>"
        )
    parts.append("</section>")
    return "".join(parts)


# ------------------------------------------------------------------------------------------------ page
def to_html(report: InspectReport, figures: Figures | None = None) -> str:
    """The whole page as a string; ``figures`` are computed from the data (a bounded sample) when not given."""
    figures = compute_figures(report) if figures is None else figures
    warnings = page_warnings(report, figures)
    name = os.path.basename(report.path.rstrip("/\\")) or report.path
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>streamfeed inspect {_e(report.path)}</title><style>{STYLE}</style></head><body><main>",
        f'<header><h1>{_e(name)}</h1><div class="path">{_e(report.path)}</div>'
        f"{_tiles(report, figures, len(warnings))}</header>",
        _warnings(warnings),
    ]
    if report.format in IMAGE_FORMATS:
        parts.extend(image_sections(report, figures))
    else:
        parts.extend(_tabular_sections(report, figures))
    parts.append(_size_section(report))
    if figures.notes:
        parts.append(
            '<section id="notes"><h2>Notes</h2>' + "".join(f'<p class="note">{_e(n)}</p>' for n in figures.notes)
            + "</section>"
        )  # fmt: skip
    parts.append(_facts(report))
    parts.append(
        '<p class="note">streamfeed inspect · self-contained page: inline SVG and images, nothing fetched.</p>'
        "</main></body></html>"
    )
    return "\n".join(part for part in parts if part)


def write_html(report: InspectReport, path: str | os.PathLike) -> None:
    """Writes :func:`to_html` of ``report`` to ``path`` (UTF-8; whole, never through a link: ``files.atomic``)."""
    write_atomic(path, to_html(report))
