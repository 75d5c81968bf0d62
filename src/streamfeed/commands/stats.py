"""``streamfeed stats``: one pass over any source, statistics saved as JSON."""

from __future__ import annotations

import argparse
from pathlib import Path

from ._options import DATA_HELP, add_format, add_memory_limit, add_reading, names, open_dataset


def register(commands: argparse._SubParsersAction) -> None:
    stats = commands.add_parser(
        "stats", help="compute column statistics, quantiles and vocabularies in one pass; save them as JSON"
    )
    stats.add_argument("source", help=DATA_HELP)
    stats.add_argument("-o", "--output", type=Path, required=True, help="where to write the statistics JSON")
    add_format(stats)
    stats.add_argument("--label", default=None, help="label column: its value counts are recorded")
    stats.add_argument(
        "--categorical", default="", help="comma-separated columns to count as categories (e.g. integer ids)"
    )
    stats.add_argument(
        "--max-vocabulary", type=int, default=100_000, help="distinct values kept exactly per categorical column"
    )
    stats.add_argument(
        "--quantiles",
        choices=["sample", "kll", "none"],
        default="sample",
        help="quantiles from a fixed hash-chosen sample (default; deterministic), a KLL sketch of every value, or none",
    )
    stats.add_argument(
        "--distinct",
        choices=["categorical", "all", "none"],
        default="categorical",
        help="distinct-count estimates for integer/categorical columns (default), all columns, or none",
    )
    stats.add_argument("--threads", type=int, default=None, help="read threads (default: min(4, CPUs))")
    add_reading(stats)
    add_memory_limit(stats, "memory for decoding: one image may decode to a quarter of it")
    stats.add_argument("--quiet", action="store_true", help="no progress bar and no summary table")
    stats.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..inspect.progress import progress
    from ..stats import compute_stats

    columns = names(args.columns)
    named = {"--columns": columns, "--label": [args.label] if args.label else []}
    read = list(dict.fromkeys(sum(named.values(), []))) if columns else None  # the label too
    source_format, dataset = open_dataset(args, args.source, read=read, named=named)
    dataset = dataset.with_options(memory_limit=args.memory_limit)
    options = {
        "columns": columns or None,
        "categorical": names(args.categorical),
        "label": args.label,
        "max_vocabulary": args.max_vocabulary,
        "quantiles": args.quantiles,
        "distinct": args.distinct,
        "threads": args.threads,
    }
    with progress(len(dataset.source.fragments), "stats", unit="fragments") as advance:
        stats = compute_stats(dataset, progress=lambda done, total: advance(), **options)
    stats.save(args.output)
    if not args.quiet:
        print(summary(stats, source_format, args.output), file=args.out)
    return 0


def _number(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _lengths_line(column) -> str:
    """A list column's row lengths, its elements' distinct count and four buckets that pad least."""
    lengths = column.lengths
    percentiles = ", ".join(f"p{round(float(q) * 100)} {value}" for q, value in lengths["quantiles"].items())
    boundaries = column.bucket_boundaries(4)
    element = column.element_stats
    return (
        f"list {column.name!r}: lengths {lengths['min']}..{lengths['max']}, mean {lengths['mean']:.4g}, {percentiles}; "
        f"{_number(element.distinct)} distinct elements; padded to the longest row {column.padding_waste():.0%} "
        f"is padding, in buckets <= {boundaries} {column.padding_waste(boundaries):.0%}"
    )


def summary(stats, source_format: str, output: Path) -> str:
    """A short table: one line per column."""
    lines = [f"{stats.rows:,} rows of {source_format}, {len(stats.columns)} column(s) -> {output}"]
    header = ("column", "kind", "count", "nulls", "nans", "min", "max", "mean", "std", "distinct")
    rows = [header]
    for column in stats.columns.values():
        rows.append(
            (
                column.name,
                column.kind,
                str(column.count),
                str(column.nulls),
                str(column.nans),
                _number(column.min),
                _number(column.max),
                _number(column.mean),
                _number(column.std),
                _number(column.distinct),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines += [_lengths_line(column) for column in stats.columns.values() if column.lengths is not None]
    if stats.label_counts is not None:
        top = sorted(stats.label_counts.items(), key=lambda item: -item[1])[:10]
        lines.append(f"label {stats.label!r}: " + ", ".join(f"{value!r}: {count}" for value, count in top))
    return "\n".join(lines)
