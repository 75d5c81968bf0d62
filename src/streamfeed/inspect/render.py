"""Printing an :class:`InspectReport` (and its quality report) as rich tables for people."""

from __future__ import annotations

import json
from typing import Any

from .report import InspectReport, human_size

# C0 and C1 control characters but tab and newline: shown as \xNN, never sent to the terminal
_CONTROLS = {code: f"\\x{code:02x}" for code in [*range(0x20), *range(0x7F, 0xA0)] if code not in (0x09, 0x0A)}


def visible(text: Any) -> str:
    """``text`` with its control characters (escape sequences) shown as ``\\xNN``, for plain-text output."""
    return str(text).translate(_CONTROLS)


def escape(text: Any) -> str:
    """``text`` as rich prints it literally: markup escaped, control characters (escape sequences) made visible.

    Every name and value that comes from the data (file, column and class
    names, samples) passes through here: a file named ``[bold]x`` or one
    holding ``\x1b[2J`` must print as those characters, not restyle or
    clear the user's terminal.
    """
    from rich.markup import escape as rich_escape

    return rich_escape(visible(text))


def _short(value: Any, width: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def _rows_exact(report: InspectReport) -> bool:
    """Whether the row count is exact: as the report says, and always for an image folder.

    An image folder's count is the images whose headers open, every one of
    them opened: the rows ``read_images`` yields, as exactly as a Parquet
    footer's count (``--full`` decodes the pixels too, which finds bad
    files, not other rows).
    """
    return report.rows_exact or report.format == "images"  # a zip archive: exact when every header was read


def render(report: InspectReport, console: Any = None) -> None:
    """Prints the report: a summary, the columns, the format's details, warnings, quality."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    rows = "unknown" if report.rows is None else f"{report.rows:,}" + ("" if _rows_exact(report) else " (estimate)")
    summary = Table(title=escape(report.path), show_header=False, title_justify="left")
    summary.add_row("format", report.format)
    summary.add_row("files", f"{report.file_count:,} ({human_size(report.total_bytes)})")
    summary.add_row("rows", rows)
    for key, value in report.details.items():
        summary.add_row(key.replace("_", " "), escape(_short(value, 100)))
    console.print(summary)
    if report.size_histogram:
        sizes = Table(title="file sizes", title_justify="left")
        sizes.add_column("size")
        sizes.add_column("files", justify="right")
        for row in report.size_histogram:
            sizes.add_row(f"{human_size(row['low'])} – {human_size(row['high'])}", f"{row['files']:,}")
        console.print(sizes)
    if report.columns:
        columns = Table(title="columns", title_justify="left")
        for name in ("name", "type", "shape", "nulls", "samples"):
            columns.add_column(name, justify="right" if name == "nulls" else "left", overflow="fold")
        for column in report.columns:
            nulls = "?" if column.nulls is None else f"{column.nulls:,}" + ("" if column.nulls_exact else " (sample)")
            shape = "" if not column.shape else str(column.shape)
            columns.add_row(escape(column.name), escape(column.type), shape, nulls, escape(_short(column.samples)))
        console.print(columns)
    for warning in report.warnings:
        console.print(
            f"[bold yellow]warning[/] {escape(f'[{warning.code}]')} {escape(warning.message)}",
            markup=True,
            highlight=False,
        )
    if not report.warnings:
        console.print("no warnings")
    if report.quality:
        render_quality(report.quality, console)


def render_quality(quality: dict, console: Any = None) -> None:
    """Prints a quality report (its ``to_dict()`` form)."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    if quality.get("columns"):
        table = Table(title=f"quality ({quality['rows']:,} rows)", title_justify="left")
        for name in ("column", "null", "NaN", "inf", "constant", "row-order rho"):
            table.add_column(name, justify="left" if name == "column" else "right")
        for name, column in quality["columns"].items():
            rho = quality.get("row_order", {}).get(name)
            table.add_row(
                escape(name),
                f"{column['null_rate']:.2%}",
                f"{column['nan_rate']:.2%}",
                f"{column['inf_rate']:.2%}",
                "yes" if column["constant"] else "",
                "" if rho is None else f"{rho:+.2f}",
            )
        console.print(table)
    duplicates = quality.get("duplicates")
    if duplicates:
        if "headline" in duplicates:  # tabular: an interval, and an estimate only when it excludes 0
            found = duplicates["headline"]
        else:  # images: an exact count of duplicate files
            found = f"{duplicates['estimated']:,}"
        console.print(f"duplicates: {found}; {duplicates['method']}", highlight=False)
    if quality.get("label"):
        label = quality["label"]
        if label.get("kind") == "continuous":
            console.print(
                f"label {escape(repr(label['column']))}: continuous, mean {label['mean']:.4g}, std {label['std']:.4g}, "
                f"range {label['min']:.4g} to {label['max']:.4g}",
                highlight=False,
            )
        elif "counts" in label:
            console.print(
                f"label {escape(repr(label['column']))}: {escape(_short(label['counts'], 120))}; "
                f"imbalance ratio {label['imbalance_ratio']:.1f}",
                highlight=False,
            )
        else:
            console.print(f"label {escape(repr(label['column']))}: {label['classes']} classes", highlight=False)
    images = quality.get("images")
    if images:
        table = Table(title=f"image quality ({images['files']:,} files)", show_header=False, title_justify="left")
        table.add_row("modes", escape(_short(images["modes"])))
        table.add_row("median size", f"{images['median_size'][0]:.0f} x {images['median_size'][1]:.0f}")
        table.add_row("blur (median, p5)", f"{images['blur']['median']:.1f}, {images['blur']['p05']:.1f}")
        for key in ("undecodable", "mode_outliers", "size_outliers", "near_black", "near_white"):
            table.add_row(key.replace("_", " "), f"{images['counts'][key]:,}")
        console.print(table)
    for warning in quality.get("warnings", []):
        console.print(f"[bold yellow]quality[/] {escape(warning)}", markup=True, highlight=False)
