"""A small static HTML page of an inspect report, for people who would rather look than read.

Self-contained: tables plus histograms drawn as inline SVG bars, so it
needs no plotting library and opens anywhere (attach it to a ticket).
"""

from __future__ import annotations

import html
import json
import os
from typing import Sequence

import numpy as np

from .report import InspectReport

_STYLE = (
    "body{font-family:sans-serif;margin:2em;max-width:70em}"
    "table{border-collapse:collapse;margin:1em 0}"
    "td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left;vertical-align:top}"
    ".warn{background:#fff4d6;padding:.4em;margin:.3em 0}"
    "svg text{font-size:11px}"
)


def _table(rows: Sequence[Sequence[object]], header: Sequence[str] | None = None) -> str:
    head = "<tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in header) + "</tr>" if header else ""
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_text(cell))}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table>{head}{body}</table>"


def _text(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 300 else text[:299] + "…"


def bar_chart(title: str, labels: Sequence[str], counts: Sequence[float]) -> str:
    """Horizontal bars as an SVG element (one bar per label)."""
    if not counts:
        return ""
    top = max(max(counts), 1)
    height = 18 * len(counts) + 24
    bars = []
    for index, (label, count) in enumerate(zip(labels, counts)):
        y = 20 + 18 * index
        width = 300 * count / top
        bars.append(
            f'<text x="0" y="{y + 12}">{html.escape(str(label))[:28]}</text>'
            f'<rect x="180" y="{y}" width="{width:.1f}" height="14" fill="#4a7ebb"/>'
            f'<text x="{185 + width:.1f}" y="{y + 12}">{count:,.0f}</text>'
        )
    return f'<h3>{html.escape(title)}</h3><svg width="560" height="{height}">{"".join(bars)}</svg>'


def _histogram(values: Sequence[float], bins: int = 12) -> tuple[list[str], list[int]]:
    array = np.asarray(values, dtype=np.float64)
    if not len(array):
        return [], []
    counts, edges = np.histogram(array, bins=bins)
    return [f"{edges[i]:,.0f}–{edges[i + 1]:,.0f}" for i in range(len(counts))], counts.tolist()


def to_html(report: InspectReport) -> str:
    """The whole page as a string."""
    data = report.to_dict()
    parts = [
        f"<!doctype html><meta charset=utf-8><title>streamfeed inspect {html.escape(report.path)}</title>"
        f"<style>{_STYLE}</style>"
    ]
    parts.append(f"<h1>{html.escape(report.path)}</h1>")
    summary = [
        ("format", report.format),
        ("files", f"{report.file_count:,} ({report.total_bytes:,} bytes)"),
        ("rows", "unknown" if report.rows is None else f"{report.rows:,}"),
    ]
    parts.append(_table(summary + [(key, value) for key, value in data["details"].items()]))
    parts.extend(
        f'<div class="warn"><b>{html.escape(w["code"])}</b> {html.escape(w["message"])}</div>' for w in data["warnings"]
    )
    if data["columns"]:
        parts.append(
            "<h2>Columns</h2>"
            + _table(
                [
                    (c["name"], c["type"], c["shape"] or "", "?" if c["nulls"] is None else c["nulls"], c["samples"])
                    for c in data["columns"]
                ],
                ["name", "type", "shape", "nulls", "samples"],
            )
        )
    if report.size_histogram:
        parts.append(
            bar_chart(
                "File sizes (bytes)",
                [f"{row['low']:,}–{row['high']:,}" for row in report.size_histogram],
                [row["files"] for row in report.size_histogram],
            )
        )
    if "classes" in report.details:
        parts.append(
            bar_chart("Images per class", list(report.details["classes"]), list(report.details["classes"].values()))
        )
    quality = report.quality
    if quality:
        parts.append("<h2>Quality</h2>")
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
            parts.append(_table(rows, ["column", "null", "NaN", "inf", "constant", "row-order rho"]))
        if quality.get("duplicates"):
            parts.append(_table(list(quality["duplicates"].items())))
        if quality.get("label") and "counts" in quality["label"]:  # classes; a continuous label has no bars
            label = quality["label"]
            parts.append(
                bar_chart(
                    f"Label {label['column']} (imbalance ratio {label['imbalance_ratio']:.1f})",
                    list(label["counts"]),
                    list(label["counts"].values()),
                )
            )
        images = quality.get("images")
        if images:
            per_image = images["per_image"]
            parts.append(bar_chart("Brightness (0-255)", *_histogram([m["brightness"] for m in per_image])))
            parts.append(
                bar_chart("Blur: variance of the Laplacian (low = blurry)", *_histogram([m["blur"] for m in per_image]))
            )
        parts.extend(f'<div class="warn">{html.escape(w)}</div>' for w in quality.get("warnings", []))
    return "\n".join(parts)


def write_html(report: InspectReport, path: str | os.PathLike) -> None:
    with open(path, "w", encoding="utf-8") as out:
        out.write(to_html(report))
