"""``streamfeed bench``: the pipeline doctor — throughput, stage times and a verdict."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..inspect.report import index_like
from ._backend import choose_keras_backend


def register(commands: argparse._SubParsersAction) -> None:
    bench = commands.add_parser("bench", help="run a pipeline briefly and name its slowest stage")
    bench.add_argument("path", help="file, directory or glob")
    bench.add_argument("--format", default=None, help="source format (default: detected from suffixes)")
    bench.add_argument("--batch-size", type=int, default=1024)
    bench.add_argument("--shuffle-seed", type=int, default=0, help="seed of the shuffle (default 0)")
    bench.add_argument("--no-shuffle", action="store_true", help="read in source order")
    bench.add_argument("--seconds", type=float, default=10.0, help="run for about this long (default 10)")
    bench.add_argument("--max-batches", type=int, default=None, help="stop after this many batches")
    bench.add_argument("--read-threads", type=int, default=None)
    bench.add_argument("--memory-limit", type=int, default=None, help="bytes for the pipeline's buffers")
    bench.add_argument(
        "--model",
        choices=["demo"],
        default=None,
        help="feed a real fit loop: 'demo' is the demo's small Dense model (tabular data)",
    )
    bench.add_argument("--label", default=None, help="label column (needed with --model)")
    bench.add_argument("--json", action="store_true", help="print the report as JSON")
    bench.add_argument("--quiet", action="store_true", help="no progress bar")
    bench.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..readers import reader_for
    from ..sources.detect import detect_format

    if args.model and not args.label:
        print("streamfeed bench: --model needs --label, the label column", file=sys.stderr)
        return 2
    source_format = args.format or detect_format(args.path)
    dataset = reader_for(source_format)(args.path)
    if not args.no_shuffle:
        dataset = dataset.shuffle(seed=args.shuffle_seed)
    dataset = dataset.batch(args.batch_size).with_options(
        memory_limit=args.memory_limit, read_threads=args.read_threads
    )
    model = features = None
    if args.model == "demo":
        choose_keras_backend()
        from ..demo import build_model

        features = feature_columns(dataset, args.label)
        model = build_model(len(features))
    from ..diagnostics import bench

    report = bench(
        dataset,
        seconds=args.seconds,
        max_batches=args.max_batches,
        model=model,
        label=args.label,
        features=features,
        progress=False if args.json else None,
    )
    if args.json:
        print(json.dumps(report.to_dict()))
    else:
        from rich.console import Console

        (Console() if sys.stdout.isatty() else Console(width=130)).print(report.render())
    return 0


def feature_columns(dataset: Any, label: str) -> list[str]:
    """The demo model's inputs: every column but the label and those that look like a row index.

    A row index (named like one, or integers counting 0, 1, 2, ... in the
    first fragment; ``inspect``'s rule) would let the model learn the row
    order; the source has already left out the index columns it knows of
    (e.g. pandas' ``__index_level_0__``).
    """
    fragments = dataset.source.fragments
    head = fragments[0].read() if fragments else {}
    return [name for name in dataset.source.column_names if name != label and not index_like(name, head.get(name))]
