"""What ``streamfeed doctor`` reports: a :class:`Finding`, and the findings said as text or JSON.

Each measurement (``doctor_pipeline``, ``doctor_cache``, ``doctor_quality``)
returns findings; ``doctor.run`` gathers them into one result dictionary,
and this module prints it: ``render`` for the text report (a line per
finding, its repair wrapped under it), ``to_json`` for ``--json``. Kept apart
from the measurements so that the words and the layout of the report are in
one place, and the measurements only say what they found.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass, field
from typing import Any

from ..inspect.render import visible

WIDTH = 118  # the text report's lines, wrapped under their finding


@dataclass
class Finding:
    """One thing the doctor measured: whether it needs repair, what was measured, and the repair."""

    kind: str  # "pipeline", "cache", "nulls", "duplicates", "row_order", "constant", "imbalance", "blur", ...
    repair: bool
    summary: str
    measured: dict[str, Any] = field(default_factory=dict)
    action: str | None = None


def count(value: float) -> str:
    """840 k, 1.2 M, 1 M: a number said the way people say it."""
    if value >= 1e6:
        return f"{value / 1e6:,.{0 if value % 1e6 == 0 else 1}f} M"
    if value >= 1e3:
        return f"{value / 1e3:,.0f} k"
    return f"{value:,.0f}"


def to_json(result: dict[str, Any]) -> str:
    """The result as one JSON document (NumPy scalars as numbers, anything else unknown as its string)."""
    return json.dumps(result, default=_jsonable)


def _jsonable(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else str(value)


def render(result: dict[str, Any]) -> str:
    """The findings as lines: ``repair`` or ``ok``, the kind, what was measured, and the repair under it.

    Paths and every summary and repair (they quote file, column and class
    names from the data) pass through ``visible``: a file named
    ``x\x1b[2J`` prints as those characters instead of clearing the terminal.
    """
    rows = f"{result['rows']:,}" if result["rows_exact"] else f"about {result['rows']:,}"
    files = f"{result['files']:,} file{'s' if result['files'] != 1 else ''}"
    lines = [
        f"streamfeed doctor  {visible(result['data'])}: {result['format']}, {files}, {rows} rows; "
        f"measured for {result['seconds']:,.1f} s"
    ]
    indent = " " * 23
    wrap: dict[str, Any] = {"width": WIDTH, "break_on_hyphens": False, "break_long_words": False}
    for finding in result["findings"]:
        head = f"  {'repair' if finding['repair'] else 'ok':<7}{finding['kind']:<14}"
        lines.append(textwrap.fill(visible(finding["summary"]), initial_indent=head, subsequent_indent=indent, **wrap))
        if finding["action"]:
            lines.append(
                textwrap.fill(
                    visible(finding["action"]), initial_indent=indent + "-> ", subsequent_indent=indent + "   ", **wrap
                )
            )
    repairs = result["repairs"]
    lines.append("nothing to repair" if not repairs else f"{repairs} thing{'s' if repairs != 1 else ''} to repair")
    return "\n".join(lines)
