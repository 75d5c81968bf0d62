"""What every page of the inspect reports shares: the style sheet, and text and tables from the data.

Split from :mod:`.html` so the section modules (the tabular page there, the
image sections in :mod:`.html_images`, the suspects page) share one look
without importing each other.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from .svg import clip
from .svg import escape as _e

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
def short_text(value: Any, width: int = 300) -> str:
    return clip(value if isinstance(value, str) else json.dumps(value, default=str), width)


def count_text(number: int, noun: str) -> str:
    return f"{number:,} {noun}" + ("" if number == 1 else "es" if noun.endswith("s") else "s")


def html_table(rows: Sequence[Sequence[object]], header: Sequence[str] | None = None) -> str:
    """A ``<table>`` of ``rows`` (each cell escaped, long values cut), with ``header`` as its first row."""
    head = "<tr>" + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr>" if header else ""
    body = "".join("<tr>" + "".join(f"<td>{_e(short_text(cell))}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table>{head}{body}</table>"
