"""SVG drawing primitives of the inspect pages: bars, histograms, the row-order band, colours, escaping.

Each function returns one inline ``<svg>`` element as a string, drawn from
plain numbers or a :class:`.figures.ColumnFigure` (horizontal bars, a
histogram, the median and 10th-90th percentile band along the row order,
the missing-value and row-order correlation bars, the thin null strip),
plus the palette and the escaping every piece of text from the data goes
through (HTML-escaped, control characters shown as ``\\xNN``).

Why a module of its own: :mod:`.html` lays out the page (which card shows
what, and why); these know only how to draw a chart, so the page sections
read as prose and the charts can be reused by any page (the suspects page
shares the escaping). Nothing here knows about an :class:`.InspectReport`.
"""

from __future__ import annotations

import html
import math
from typing import Any, Sequence

from .figures import ColumnFigure

BLUE, ORANGE, RED, PURPLE, NAVY, BAND, GREY = (
    "#4a7ebb", "#e8a33d", "#d9534f", "#8e5cc4", "#1d4f91", "#c9dbf2", "#98a2b3",
)  # fmt: skip
ORDER_THRESHOLD = 0.3  # as the quality report flags a column (|rho| with the row number)
_CONTROLS = {code: f"\\x{code:02x}" for code in [*range(0x20), *range(0x7F, 0xA0)] if code not in (0x09, 0x0A)}


def escape(value: Any) -> str:
    """Text from the data, escaped for HTML, control characters (escape sequences) shown as ``\\xNN``."""
    return html.escape(str(value).translate(_CONTROLS))


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, the last one an ellipsis when cut."""
    return text if len(text) <= width else text[: width - 1] + "…"


def svg_element(kind: str, width: int, height: int, body: str, label: str = "") -> str:
    """An ``<svg>`` of class ``kind`` around ``body``; ``label`` (what it is of) becomes its ``data-for``."""
    data = f' data-for="{escape(label)}"' if label else ""
    return (
        f'<svg class="{kind}"{data} viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="{escape(kind)} {escape(label)}">{body}</svg>'
    )


def bar_chart(
    title: str,
    labels: Sequence[str],
    counts: Sequence[float],
    *,
    kind: str = "bars",
    width: int = 350,
    color: str = BLUE,
    total: float | None = None,
    name: str = "",
) -> str:
    """Horizontal bars as an SVG element, one per label (the count, and its share of ``total`` when given).

    ``kind`` is the SVG's class, ``name`` (or the title) its ``data-for``: what the bars are of.
    """
    if not counts:
        return ""
    top = max(max(counts), 1)
    label_width, row = 120, 18
    room = width - label_width - 82
    bars = []
    for index, (label, count) in enumerate(zip(labels, counts)):
        y = 4 + row * index
        length = max(1.0, room * count / top) if count else 0.0
        share = f" ({count / total:.0%})" if total else ""
        text = str(label)
        bars.append(
            f"<g><title>{escape(text)}: {count:,.0f}{share}</title>"
            f'<text x="{label_width - 6}" y="{y + 11}" text-anchor="end">{escape(clip(text, 18))}</text>'
            f'<rect x="{label_width}" y="{y}" width="{length:.1f}" height="{row - 5}" rx="2" fill="{color}"/>'
            f'<text x="{label_width + length + 4:.1f}" y="{y + 11}">{count:,.0f}{share}</text></g>'
        )
    chart = svg_element(kind, width, 8 + row * len(counts), "".join(bars), name or title)
    return (f"<h3>{escape(title)}</h3>" if title else "") + chart


def histogram_svg(figure: ColumnFigure, *, width: int = 350, height: int = 118, color: str = BLUE) -> str:
    """Vertical bins of a column (``figure.counts`` over ``figure.edges``), min, middle and max edge below."""
    if not figure.counts:
        return ""
    left, bottom, top_pad = 34, 18, 6
    plot_w, plot_h = width - left - 4, height - bottom - top_pad
    peak = max(max(figure.counts), 1)
    step = plot_w / len(figure.counts)
    parts = [
        f'<line x1="{left}" y1="{top_pad + plot_h}" x2="{width - 4}" y2="{top_pad + plot_h}" stroke="#98a2b3"/>',
        f'<text class="axis" x="{left - 4}" y="{top_pad + 8}" text-anchor="end">{peak:,}</text>',
        f'<text class="axis" x="{left - 4}" y="{top_pad + plot_h}" text-anchor="end">0</text>',
    ]
    for index, count in enumerate(figure.counts):
        bar = plot_h * count / peak
        low, high = figure.edge_labels[index], figure.edge_labels[index + 1]
        parts.append(
            f'<rect x="{left + index * step + 0.5:.1f}" y="{top_pad + plot_h - bar:.1f}" '
            f'width="{max(step - 1, 1):.1f}" height="{bar:.1f}" fill="{color}">'
            f"<title>{escape(low)} – {escape(high)}: {count:,}</title></rect>"
        )
    labels = figure.edge_labels
    y = height - 4
    parts.append(f'<text class="axis" x="{left}" y="{y}">{escape(labels[0])}</text>')
    parts.append(f'<text class="axis" x="{left + plot_w / 2:.1f}" y="{y}" text-anchor="middle">'
                 f"{escape(labels[len(labels) // 2])}</text>")  # fmt: skip
    parts.append(f'<text class="axis" x="{width - 4}" y="{y}" text-anchor="end">{escape(labels[-1])}</text>')
    return svg_element("hist", width, height, "".join(parts), figure.name)


def order_svg(figure: ColumnFigure, *, width: int = 350, height: int = 64) -> str:
    """The column's median (line) and 10th-90th percentiles (band) along the row order, first row to last."""
    if len(figure.order) < 2:
        return ""
    widest = max(len(figure.order_labels[0]), len(figure.order_labels[1]))
    left, right, top_pad, bottom = min(72, max(34, 6 * widest + 8)), 4, 4, 14
    plot_w, plot_h = width - left - right, height - top_pad - bottom
    low = min(p10 for p10, _, _ in figure.order)
    high = max(p90 for _, _, p90 in figure.order)
    span = (high - low) or 1.0

    def point(index: int, value: float) -> str:
        x = left + plot_w * index / (len(figure.order) - 1)
        y = top_pad + plot_h * (1 - (value - low) / span)
        return f"{x:.1f},{y:.1f}"

    band = [point(i, p90) for i, (_, _, p90) in enumerate(figure.order)]
    band += [point(i, p10) for i, (p10, _, _) in reversed(list(enumerate(figure.order)))]
    line = [point(i, median) for i, (_, median, _) in enumerate(figure.order)]
    rho = figure.rho if figure.rho is not None else 0.0
    colour = RED if abs(rho) >= ORDER_THRESHOLD else NAVY
    body = (
        f"<title>median and 10th–90th percentile of {escape(figure.name)} from the first row to the last "
        f"(Spearman rho {rho:+.2f})</title>"
        f'<rect x="{left}" y="{top_pad}" width="{plot_w}" height="{plot_h}" fill="#f7f8fa"/>'
        f'<polygon points="{" ".join(band)}" fill="{BAND}"/>'
        f'<polyline points="{" ".join(line)}" fill="none" stroke="{colour}" stroke-width="1.6"/>'
        f'<text class="axis" x="{left - 4}" y="{top_pad + 8}" text-anchor="end">'
        f"{escape(clip(figure.order_labels[1], 11))}</text>"
        f'<text class="axis" x="{left - 4}" y="{top_pad + plot_h}" text-anchor="end">'
        f"{escape(clip(figure.order_labels[0], 11))}</text>"
        f'<text class="axis" x="{left}" y="{height - 2}">first row</text>'
        f'<text class="axis" x="{width - right}" y="{height - 2}" text-anchor="end">last row</text>'
    )
    return svg_element("order", width, height, body, figure.name)


def missing_svg(entries: Sequence[tuple[str, float, float, float]], *, width: int = 560) -> str:
    """One stacked bar per column: the share of rows null, NaN and infinite (0 to 100 %)."""
    if not entries:
        return ""
    label_width, row = 150, 18
    room = width - label_width - 70
    parts = []
    for index, (name, null, nan, inf) in enumerate(entries):
        y = 4 + row * index
        parts.append(
            f"<g><title>{escape(name)}: null {null:.2%}, NaN {nan:.2%}, inf {inf:.2%}</title>"
            f'<text x="{label_width - 6}" y="{y + 11}" text-anchor="end">{escape(clip(name, 22))}</text>'
            f'<rect x="{label_width}" y="{y}" width="{room}" height="{row - 5}" rx="2" fill="#eef1f6"/>'
        )
        x = float(label_width)
        for share, colour in ((null, ORANGE), (nan, RED), (inf, PURPLE)):
            if share > 0:
                length = max(1.5, room * share)
                parts.append(f'<rect x="{x:.1f}" y="{y}" width="{length:.1f}" height="{row - 5}" fill="{colour}"/>')
                x += length
        total = null + nan + inf
        text = "none" if total == 0 else f"{total:.1%}" if total >= 0.001 else f"{total:.2%}"
        parts.append(f'<text x="{label_width + room + 6}" y="{y + 11}">{text}</text></g>')
    return svg_element("missing", width, 8 + row * len(entries), "".join(parts))


def rho_svg(entries: Sequence[tuple[str, float]], *, width: int = 560) -> str:
    """Spearman's rho of each column with the row number, -1 to +1, the flagged range shaded."""
    if not entries:
        return ""
    label_width, row = 150, 18
    room = width - label_width - 60
    centre = label_width + room / 2
    height = 22 + row * len(entries)
    parts = [
        f'<rect x="{centre - room / 2:.1f}" y="0" width="{room * (1 - ORDER_THRESHOLD) / 2:.1f}" '
        f'height="{height - 16}" fill="#fdecea"/>',
        f'<rect x="{centre + room * ORDER_THRESHOLD / 2:.1f}" y="0" width="{room * (1 - ORDER_THRESHOLD) / 2:.1f}" '
        f'height="{height - 16}" fill="#fdecea"/>',
        f'<line x1="{centre:.1f}" y1="0" x2="{centre:.1f}" y2="{height - 16}" stroke="#98a2b3"/>',
    ]
    for index, (name, rho) in enumerate(entries):
        y = 4 + row * index
        length = room / 2 * abs(rho)
        x = centre if rho >= 0 else centre - length
        colour = RED if abs(rho) >= ORDER_THRESHOLD else BLUE
        parts.append(
            f"<g><title>{escape(name)}: Spearman rho {rho:+.3f}</title>"
            f'<text x="{label_width - 6}" y="{y + 11}" text-anchor="end">{escape(clip(name, 22))}</text>'
            f'<rect x="{x:.1f}" y="{y}" width="{max(length, 1):.1f}" height="{row - 5}" fill="{colour}"/>'
            f'<text x="{label_width + room + 6}" y="{y + 11}">{rho:+.2f}</text></g>'
        )
    axis = height - 3
    parts.append(f'<text class="axis" x="{label_width}" y="{axis}">−1 (sorted descending)</text>')
    parts.append(f'<text class="axis" x="{centre:.1f}" y="{axis}" text-anchor="middle">0</text>')
    parts.append(
        f'<text class="axis" x="{label_width + room}" y="{axis}" text-anchor="end">+1 (sorted ascending)</text>'
    )
    return svg_element("rho", width, height, "".join(parts))


def binned(values: Sequence[float], bins: int, text: Any) -> ColumnFigure:
    """A histogram figure of plain values (image brightness, blur, rows per fragment)."""
    figure = ColumnFigure("", "numeric", "float64")
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return figure
    low, high = min(finite), max(finite)
    if high == low:
        low, high = low - 0.5, high + 0.5
    step = (high - low) / bins
    counts = [0] * bins
    for value in finite:
        counts[min(bins - 1, int((value - low) / step))] += 1
    figure.counts = counts
    figure.edges = [low + step * i for i in range(bins + 1)]
    figure.edge_labels = [text(edge) for edge in figure.edges]
    return figure


def null_strip(name: str, null: float, nan: float, width: int = 350) -> str:
    """A thin bar: present (blue), null (orange), NaN (red) shares of the rows."""
    present = max(0.0, 1 - null - nan)
    x, rects = 0.0, []
    for share, colour in ((present, BLUE), (null, ORANGE), (nan, RED)):
        if share > 0:
            length = max(2.0, width * share) if share < 1 else width
            rects.append(f'<rect x="{x:.1f}" y="0" width="{length:.1f}" height="6" fill="{colour}"/>')
            x += length
    body = f"<title>present {present:.1%}, null {null:.1%}, NaN {nan:.1%}</title>" + "".join(rects)
    return svg_element("nullbar", width, 8, body, name)
