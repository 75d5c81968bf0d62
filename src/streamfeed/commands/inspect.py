"""``streamfeed inspect``: what is in a dataset and what will hurt training.

``--quality`` adds one pass over the data.
"""

from __future__ import annotations

import argparse
import json

from ._options import add_format, add_memory_limit


def register(commands: argparse._SubParsersAction) -> None:
    inspect = commands.add_parser(
        "inspect", help="show files, rows, schema and layout of a dataset, and warnings for training"
    )
    inspect.add_argument(
        "path",
        help="file or directory, a .zip of class folders or .tar shards "
        "(a DataCheckpoint directory: the training state it saved)",
    )
    add_format(inspect)
    inspect.add_argument("--json", action="store_true", help="print the report as JSON (the whole of stdout)")
    inspect.add_argument(
        "--full",
        action="store_true",
        help="scan all the data (exact null counts, decode every image) instead of metadata and samples",
    )
    inspect.add_argument("--quality", action="store_true", help="add the data-quality report (one pass over the data)")
    inspect.add_argument("--label", default=None, help="label column for the quality report")
    add_memory_limit(inspect, "memory the pipeline may use: row groups are checked against it")
    inspect.add_argument("--sample-rows", type=int, default=5, help="sample values per column")
    inspect.add_argument(
        "--html", default=None, metavar="FILE", help="also write a small static HTML report with histograms"
    )
    inspect.add_argument("--quiet", action="store_true", help="no progress bar")
    inspect.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..inspect import inspect
    from ..inspect.training_state import is_training_state, read_training_state, render_training_state

    if is_training_state(args.path):  # a DataCheckpoint directory: where training stood, not a dataset
        summary = read_training_state(args.path)
        print(json.dumps(summary, indent=1) if args.json else "\n".join(render_training_state(summary)), file=args.out)
        return 0

    report = inspect(
        args.path, format=args.format, full=args.full, sample_rows=args.sample_rows,
        memory_limit=args.memory_limit, quality=args.quality, label=args.label,
    )  # fmt: skip
    if args.html:
        from ..inspect.html import write_html

        write_html(report, args.html)
    if args.json:
        print(json.dumps(report.to_dict(), indent=1), file=args.out)
    else:
        from rich.console import Console

        from ..inspect.render import render

        render(report, Console(file=args.out))
    return 0
