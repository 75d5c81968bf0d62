"""The label-noise suspects as an ``inspect --html``-style page: each suspect's thumbnail and its evidence.

:meth:`DataQualityMonitor.write_suspects_html
<streamfeed.keras.DataQualityMonitor.write_suspects_html>` writes it for
image inputs (row ids that are image paths). One card per suspect, most
suspect first: the image as the inspect report shows it (a JPEG thumbnail
inline, through the same bounded decoder, :func:`.figures.thumbnail`), its
rank, id, path, given label and the evidence (mean margin over training,
the AUM; the last margin, the mean loss and the times trained), then the
same in one table. A row whose id is not an image file gets a card without
a picture. The page uses the inspect report's style sheet and figure markup
(:mod:`.html`) and is self-contained in the same way: nothing is fetched.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from ..files.atomic import write_atomic
from .figures import THUMB_SIDE, Thumb, thumbnail
from .html_base import STYLE, html_table
from .html_images import thumb_figure
from .svg import escape as _e

MAX_THUMBNAILS = 200  # pictures on the page (each ~3 KiB of base64 JPEG); the table lists every suspect


def _class_name(label: Any, class_names: Sequence[str] | Mapping[int, str] | None) -> str:
    if class_names is None:
        return str(label)
    try:
        return f"{class_names[label]} ({label})"
    except (IndexError, KeyError, TypeError):
        return str(label)


def _root(paths: Sequence[str]) -> str:
    """The folder the shown paths are relative to (their common folder)."""
    if not paths:
        return ""
    common = os.path.commonpath([os.path.abspath(path) for path in paths])
    return common if len(paths) > 1 or not os.path.isfile(common) else os.path.dirname(common)


def suspects_page(
    suspects: Sequence[Mapping[str, Any]],
    *,
    noise_rate: float | None = None,
    tracked: int | None = None,
    class_names: Sequence[str] | Mapping[int, str] | None = None,
    title: str = "Label-noise suspects",
    max_thumbnails: int = MAX_THUMBNAILS,
) -> str:
    """The page as a string; ``suspects`` as :meth:`DataQualityMonitor.suspects` returns them (ranked).

    A suspect's image is its ``path`` (or its ``id`` when that is an
    existing file); only the first ``max_thumbnails`` get a picture.
    """
    paths = [str(row.get("path") or row["id"]) for row in suspects]
    images = [path for path in paths if os.path.isfile(path)]
    root = _root(images)
    cards = []
    for number, (row, path) in enumerate(zip(suspects, paths)):
        label = _class_name(row.get("label"), class_names)
        caption = f"#{row.get('rank', number + 1)} · AUM {row['mean_margin']:.2f}"
        if number < max_thumbnails and os.path.isfile(path):
            thumb = thumbnail(path, root, side=THUMB_SIDE)
        else:
            thumb = Thumb(os.path.relpath(path, root) if root else path, error="not an image file")
        thumb.caption = caption
        cards.append(
            f'<div class="card suspect-card" data-rank="{_e(row.get("rank", number + 1))}" data-id="{_e(row["id"])}">'
            f"{thumb_figure(thumb, 'suspect', label)}"
            f'<p class="meta">{_e(thumb.path)}<br>given label <b>{_e(label)}</b><br>'
            f"mean margin {row['mean_margin']:.3f} · last {row.get('last_margin', float('nan')):.3f}<br>"
            f"mean loss {row.get('mean_loss', float('nan')):.3f} · trained {_e(row.get('times_trained', ''))}x"
            "</p></div>"
        )
    tiles = [("suspects", f"{len(suspects):,}")]
    if noise_rate is not None:
        tiles.append(("estimated label noise", f"{100 * noise_rate:.1f} %"))
    if tracked is not None:
        tiles.append(("rows tracked", f"{tracked:,}"))
    header = '<div class="tiles">' + "".join(
        f'<div class="tile"><b>{_e(value)}</b><span>{_e(name)}</span></div>' for name, value in tiles
    )
    table = html_table(
        [
            [
                row.get("rank", number + 1),
                row["id"],
                _class_name(row.get("label"), class_names),
                round(row["mean_margin"], 4),
                round(row.get("last_margin", float("nan")), 4),
                round(row.get("mean_loss", float("nan")), 4),
                row.get("times_trained", ""),
            ]
            for number, row in enumerate(suspects)
        ],
        ["rank", "id", "given label", "mean margin (AUM)", "last margin", "mean loss", "times trained"],
    )
    shown = min(len(suspects), max_thumbnails)
    note = (
        "Ranked by the area under the margin (AUM, Pleiss et al. 2020): the mean, over training, of the margin "
        "between the given label's score and the largest other one. A negative mean margin means the model "
        "kept preferring another class: the label is suspect."
        + (f" Pictures for the first {shown:,} of {len(suspects):,}." if shown < len(suspects) else "")
    )
    return "\n".join(
        [
            "<!doctype html><html lang=en><head><meta charset=utf-8>"
            '<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>streamfeed {_e(title)}</title><style>{STYLE}"
            ".suspect-card{width:200px}.suspect-card figure{margin:0 auto}</style></head><body><main>",
            f'<header><h1>{_e(title)}</h1><div class="path">{_e(root)}</div>{header}</div></header>',
            f'<section id="suspects"><h2>Suspects, most suspect first</h2><p class="note">{_e(note)}</p>'
            f'<div class="thumbs">{"".join(cards)}</div></section>',
            f'<section id="evidence"><h2>Evidence</h2>{table}</section>',
            '<p class="note">streamfeed DataQualityMonitor · self-contained page: inline images, nothing fetched.</p>'
            "</main></body></html>",
        ]
    )


def write_suspects_html(path: str | os.PathLike, suspects: Sequence[Mapping[str, Any]], **options: Any) -> int:
    """Writes :func:`suspects_page` to ``path`` (UTF-8, whole, never through a link); returns the suspects shown."""
    write_atomic(path, suspects_page(suspects, **options))
    return len(suspects)
