"""The inspect report as one static HTML page, for people who would rather look than read.

What it shows: a header of key figures and every warning; for tables, one
card per column (a histogram for numbers and dates, the most frequent
values for the rest, its nulls and NaN, and its median along the row order
with Spearman's rho), the missing values of every column side by side, the
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

import json
import math
import os
from typing import Any, Sequence

from ..files.atomic import write_atomic
from .figures import ColumnFigure, Figures, Thumb, compute_figures
from .report import InspectReport, human_size
from .svg import (
    BLUE,
    ORANGE,
    ORDER_THRESHOLD,
    PURPLE,
    RED,
    bar_chart,
    binned,
    clip,
    histogram_svg,
    missing_svg,
    null_strip,
    order_svg,
    rho_svg,
)
from .svg import escape as _e  # short: every f-string below escapes its data through it

STYLE = """
:root{--fg:#1d2330;--muted:#5d6778;--line:#e1e5ec;--bg:#f5f6f8}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--fg);
background:var(--bg);margin:0}
main{max-width:1220px;margin:0 auto;padding:20px 24px 40px}
h1{font-size:22px;margin:0;overflow-wrap:anywhere}
h2{font-size:17px;margin:28px 0 10px;padding-bottom:4px;border-bottom:2px solid var(--line)}
h3{font-size:14px;margin:0 0 2px;overflow-wrap:anywhere}
.path{color:var(--muted);font-size:12px;overflow-wrap:anywhere}
.tiles{display:flex;flex-wrap:wrap;gap:10px;margin:14px 0 4px}
.tile{background:#fff;border:1px solid var(--line);border-radius:8px;padding:8px 14px;min-width:110px}
.tile b{display:block;font-size:19px;line-height:1.2}
.tile span{color:var(--muted);font-size:12px}
.tile.bad b{color:#b54708}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(370px,1fr));gap:12px}
.wide{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:12px}
.card{background:#fff;border:1px solid var(--line);border-radius:8px;padding:10px 12px}
.meta{color:var(--muted);font-size:12px;margin:0 0 4px}
.badge{display:inline-block;font-size:11px;font-weight:normal;color:#344054;background:#eef1f6;border-radius:4px;
padding:0 6px;margin-left:6px;vertical-align:1px}
.badge.label{background:#dcfae6;color:#085d3a}
.note{color:var(--muted);font-size:12px;margin:4px 0}
.warn{background:#fff6e0;border-left:4px solid #e8a33d;padding:5px 10px;margin:5px 0;border-radius:4px;
overflow-wrap:anywhere}
.warn code{font-weight:bold;margin-right:6px}
.ok{color:#085d3a}
.legend{font-size:12px;color:var(--muted)}
.legend i{display:inline-block;width:10px;height:10px;border-radius:2px;margin:0 4px 0 10px;vertical-align:-1px}
.thumbs{display:flex;flex-wrap:wrap;gap:8px;margin-top:6px}
figure{margin:0;width:100px;font-size:11px;color:var(--muted);text-align:center}
figure img,figure .missing{display:block;width:100px;height:100px;object-fit:contain;background:#e4e7ec;
border-radius:6px;border:1px solid var(--line)}
figure .missing{display:flex;align-items:center;justify-content:center;color:#b42318;font-size:11px;padding:4px}
figcaption{white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
figure.flagged img,figure.flagged .missing{border:2px solid #d9534f}
figure.flagged figcaption{color:#b42318;font-weight:600}
.class-row{display:grid;grid-template-columns:150px 1fr;gap:10px;align-items:start;padding:8px 0;
border-top:1px solid var(--line)}
.class-row:first-of-type{border-top:0}
.class-row h3{margin-top:6px}
.dups{display:flex;flex-wrap:wrap;gap:14px}
.dups .thumbs{background:#fbecec;border-radius:8px;padding:6px;margin:0}
svg{display:block;max-width:100%;height:auto;overflow:visible}
svg text{font-size:11px;fill:#344054;font-family:inherit}
svg .axis{fill:var(--muted);font-size:10px}
table{border-collapse:collapse;margin:8px 0;background:#fff;font-size:13px}
td,th{border:1px solid var(--line);padding:3px 8px;text-align:left;vertical-align:top;overflow-wrap:anywhere}
th{background:#f0f2f5}
details{margin:6px 0}
summary{cursor:pointer;color:#344054;font-weight:600}
"""


# ------------------------------------------------------------------------------------------------ text
def _short(value: Any, width: int = 300) -> str:
    return clip(value if isinstance(value, str) else json.dumps(value, default=str), width)


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}" + ("" if number == 1 else "es" if noun.endswith("s") else "s")


def _float(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def html_table(rows: Sequence[Sequence[object]], header: Sequence[str] | None = None) -> str:
    """A ``<table>`` of ``rows`` (each cell escaped, long values cut), with ``header`` as its first row."""
    head = "<tr>" + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr>" if header else ""
    body = "".join("<tr>" + "".join(f"<td>{_e(_short(cell))}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table>{head}{body}</table>"


# ------------------------------------------------------------------------------------------------ parts
def _tiles(report: InspectReport, figures: Figures, warnings: int) -> str:
    rows = "unknown" if report.rows is None else ("" if report.rows_exact else "≈") + f"{report.rows:,}"
    tiles = [
        ("format", report.format),
        ("files", f"{report.file_count:,}"),
        ("on disk", human_size(report.total_bytes)),
        ("images" if report.format == "images" else "rows", rows),
    ]
    if report.format == "images":
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


def _warnings(report: InspectReport) -> str:
    items = [f'<div class="warn"><code>{_e(w.code)}</code>{_e(w.message)}</div>' for w in report.warnings]
    items += [
        f'<div class="warn"><code>quality</code>{_e(w)}</div>' for w in (report.quality or {}).get("warnings", [])
    ]
    if not items:
        return '<section id="warnings"><h2>Warnings</h2><p class="ok">No warnings.</p></section>'
    return f'<section id="warnings"><h2>Warnings ({len(items)})</h2>{"".join(items)}</section>'


def _column_card(figure: ColumnFigure, report: InspectReport, label: str | None) -> str:
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
    if figure.kind in ("numeric", "datetime"):
        parts.append(histogram_svg(figure))
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
        rho = _float((report.quality or {}).get("row_order", {}).get(figure.name))
        rho = figure.rho if rho is None else rho
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
        spread = (
            f", taken evenly from {figures.fragments_read:,} of {figures.fragment_count:,} fragments"
            if figures.fragments_read < figures.fragment_count
            else ""
        )
        more = f"; {figures.more_columns:,} more columns are listed under All facts" if figures.more_columns else ""
        legend = (
            f'<span class="legend"><i style="background:{BLUE}"></i>present<i style="background:{ORANGE}"></i>null'
            f'<i style="background:{RED}"></i>NaN</span>'
        )
        parts.append(
            f'<section id="columns"><h2>Columns</h2><p class="note">Figures {_e(sample + spread + more)}. '
            f"Rates marked “all rows” come from the quality pass. {legend}</p>"
            f'<div class="grid">{"".join(_column_card(f, report, label) for f in figures.columns)}</div></section>'
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
            f'<p class="meta">{_count(len(counts), "class")}, all rows</p>'
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


def thumb_figure(thumb: Thumb, kind: str, label: str = "") -> str:
    """A thumbnail as a ``<figure>`` (its image, or a box saying why there is none) with its caption."""
    caption = thumb.caption or os.path.basename(thumb.path)
    flag = " (flagged by the quality report)" if thumb.flagged else ""
    title = _e(
        thumb.path
        + (f" — {thumb.caption}" if thumb.caption else "")
        + flag
        + (f": {thumb.error}" if thumb.error else "")
    )
    data = f' data-class="{_e(label)}"' if label else ""
    attributes = f'title="{title}"' + (' class="flagged"' if thumb.flagged else "")
    if thumb.uri is None:
        return (
            f'<figure {attributes}><div class="missing {kind}"{data}>{_e(_reason(thumb.error or ""))}</div>'
            f"<figcaption>{_e(caption)}</figcaption></figure>"
        )
    return (
        f'<figure {attributes}><img class="thumb {kind}"{data} src="{thumb.uri}" alt="{_e(thumb.path)}" '
        f'width="{thumb.width}" height="{thumb.height}"><figcaption>{_e(caption)}</figcaption></figure>'
    )


def _reason(error: str) -> str:
    """What a thumbnail's box says instead of the image (the whole error is in its title)."""
    if "TooLarge" in error or "larger than" in error:
        return "too large to preview"
    return "does not decode"


def _image_sections(report: InspectReport, figures: Figures) -> list[str]:
    parts: list[str] = []
    quality = report.quality or {}
    images = quality.get("images") or {}
    counts = figures.class_counts
    unlabelled = list(counts) == ["(no class)"]
    if unlabelled:
        rows = [
            f'<div class="thumbs">{"".join(thumb_figure(t, "class-thumb", name) for t in thumbs)}</div>'
            for name, thumbs in figures.classes.items()
        ]
        parts.append(
            f'<section id="classes"><h2>Images</h2><p class="note">No class sub-folders: the folder has no label. '
            f"{len(figures.classes.get('(no class)', [])):,} of {counts['(no class)']:,} images, taken evenly.</p>"
            f'<div class="card">{"".join(rows)}</div></section>'
        )
    elif counts:
        total = sum(counts.values())
        shown = sorted(counts.items(), key=lambda item: -item[1])[:30]
        chart = bar_chart("", [k for k, _ in shown], [v for _, v in shown], kind="label", width=540, total=total)
        rows = []

        def shown_of(shown: int, files: int) -> str:
            return f"<br>{shown} shown, taken evenly" if shown < files else ""

        for name, thumbs in figures.classes.items():
            grid = "".join(thumb_figure(t, "class-thumb", name) for t in thumbs) or '<p class="note">no images</p>'
            rows.append(
                f'<div class="class-row" data-class="{_e(name)}"><div><h3>{_e(name)}</h3>'
                f'<p class="meta">{counts.get(name, 0):,} images{shown_of(len(thumbs), counts.get(name, 0))}</p></div>'
                f'<div class="thumbs">{grid}</div></div>'
            )
        more = (
            f'<p class="note">{figures.more_classes:,} more classes are not shown.</p>' if figures.more_classes else ""
        )
        parts.append(
            f'<section id="classes"><h2>Classes</h2><div class="wide"><div class="card" id="label">'
            f'<h3>Images per class (the label)</h3><p class="meta">{_count(len(counts), "class")}, {total:,} files</p>'
            f'{chart}</div></div><h2>Thumbnails per class</h2><div class="card">{"".join(rows)}{more}</div></section>'
        )
    quality_parts = []
    titles = {
        "darkest": "Darkest (mean brightness, 0–255)",
        "brightest": "Brightest",
        "blurriest": "Blurriest (variance of the Laplacian: low = blurry)",
    }
    for key, thumbs in figures.extremes.items():
        if thumbs:
            quality_parts.append(
                f'<div class="card" id="{key}"><h3>{titles[key]}</h3><div class="thumbs">'
                f"{''.join(thumb_figure(t, key) for t in thumbs)}</div></div>"
            )
    if figures.duplicates:
        groups = "".join(
            f'<div class="thumbs">{"".join(thumb_figure(t, "duplicate") for t in group)}</div>'
            for group in figures.duplicates
        )
        found = (quality.get("duplicates") or {}).get("estimated", 0)
        quality_parts.append(
            f'<div class="card" id="duplicates"><h3>Duplicate files ({found:,} beyond the first of each group)</h3>'
            f'<div class="dups">{groups}</div></div>'
        )
    per_image = images.get("per_image") or []
    for key, title, text in (
        ("brightness", "Brightness (mean, 0–255)", lambda v: f"{v:.0f}"),
        ("blur", "Blur (variance of the Laplacian)", lambda v: f"{v:,.0f}"),
    ):
        figure = binned([m.get(key) for m in per_image], 16, text)
        if figure.counts:
            figure.name = key
            quality_parts.append(
                f'<div class="card"><h3>{title}</h3><p class="meta">{len(per_image):,} images</p>'
                f"{histogram_svg(figure, width=540)}</div>"
            )
    undecodable = images.get("undecodable") or report.details.get("undecodable") or []
    if undecodable:
        quality_parts.append(
            '<div class="card"><h3>Undecodable files</h3>'
            + html_table(
                [(os.path.relpath(u["path"], report.path), u["error"]) for u in undecodable[:20]], ["file", "error"]
            )
            + "</div>"
        )
    if quality_parts:
        parts.append(f'<section id="image-quality"><h2>Image quality</h2><div class="wide">{"".join(quality_parts)}'
                     "</div></section>")  # fmt: skip
    return parts


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
    warnings = len(report.warnings) + len((report.quality or {}).get("warnings", []))
    name = os.path.basename(report.path.rstrip("/\\")) or report.path
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>streamfeed inspect {_e(report.path)}</title><style>{STYLE}</style></head><body><main>",
        f'<header><h1>{_e(name)}</h1><div class="path">{_e(report.path)}</div>'
        f"{_tiles(report, figures, warnings)}</header>",
        _warnings(report),
    ]
    if report.format == "images":
        parts.extend(_image_sections(report, figures))
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
