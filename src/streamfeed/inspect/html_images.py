"""The image sections of the inspect HTML page: thumbnails per class, the quality pass's images, bad files.

Split from :mod:`.html` (which lays out the page and its tabular
sections): these know how an image folder's report reads, from the
thumbnails and findings :mod:`.figures` computed.
"""

from __future__ import annotations

import os

from .figures import Figures, Thumb
from .html_base import count_text, html_table
from .images import EMPTY_FILE
from .report import InspectReport
from .svg import bar_chart, binned, histogram_svg
from .svg import escape as _e


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
    return EMPTY_FILE if error == EMPTY_FILE else "does not decode"


def image_sections(report: InspectReport, figures: Figures) -> list[str]:
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
            f'<h3>Images per class (the label)</h3><p class="meta">{count_text(len(counts), "class")}, '
            f"{total:,} files</p>"
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
