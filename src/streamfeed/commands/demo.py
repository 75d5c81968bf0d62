"""``streamfeed demo``: generate a Parquet dataset once and train on it."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from ._backend import load_keras
from ._options import add_memory_limit


def register(commands: argparse._SubParsersAction) -> None:
    demo = commands.add_parser(
        "demo", help="generate a synthetic Parquet dataset (cached) and train a Keras model on it"
    )
    demo.add_argument(
        "--rows", type=int, default=2_000_000, help="rows to generate (default 2,000,000; may exceed RAM)"
    )
    demo.add_argument("--features", type=int, default=32, help="feature columns to generate (default 32)")
    demo.add_argument("--epochs", type=int, default=2, help="epochs to train (default 2)")
    demo.add_argument("--batch-size", type=int, default=1024, help="rows per batch (default 1024)")
    demo.add_argument("--data-dir", type=Path, default=None, help="cache directory (default ~/.cache/streamfeed/demo)")
    add_memory_limit(demo)
    demo.add_argument("--json", action="store_true", help="print the summary as JSON (the whole of stdout)")
    demo.add_argument("--quiet", action="store_true", help="no progress bar")
    demo.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from .. import demo

    directory = demo.data_directory(args.data_dir)
    target = demo.dataset_path(directory, args.rows, args.features)
    if not demo.is_generated(target):
        if not args.quiet:
            size = demo.estimated_bytes(args.rows, args.features)
            print(
                f"streamfeed demo: generating the dataset (first run only; later runs reuse it): {args.rows:,} rows "
                f"x {args.features} float32 features, about {size / 2**20:,.1f} MiB, in {target}",
                file=sys.stderr,
                flush=True,
            )
        demo.generate(directory, args.rows, args.features)  # before Keras loads: the bar shows at once
    load_keras(silence=not args.debug)
    result = demo.run(
        rows=args.rows,
        features=args.features,
        epochs=args.epochs,
        batch_size=args.batch_size,
        data_dir=args.data_dir,
        memory_limit=args.memory_limit,
        # Keras prints to stdout, which the CLI points at stderr: live on a terminal, one line per epoch in a log
        verbose=0 if args.quiet else (1 if sys.stderr.isatty() else 2),
    )
    print(json.dumps(asdict(result)) if args.json else demo.summary(result), file=args.out)
    return 0
