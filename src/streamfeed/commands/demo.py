"""``streamfeed demo``: generate a Parquet dataset once and train on it."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from ._backend import choose_keras_backend


def register(commands: argparse._SubParsersAction) -> None:
    demo = commands.add_parser(
        "demo", help="generate a synthetic Parquet dataset (cached) and train a Keras model on it"
    )
    demo.add_argument(
        "--rows", type=int, default=2_000_000, help="rows to generate (default 2,000,000; may exceed RAM)"
    )
    demo.add_argument("--features", type=int, default=32)
    demo.add_argument("--epochs", type=int, default=2)
    demo.add_argument("--batch-size", type=int, default=1024)
    demo.add_argument("--data-dir", type=Path, default=None, help="cache directory (default ~/.cache/streamfeed/demo)")
    demo.add_argument("--memory-limit", type=int, default=None, help="bytes for the pipeline's buffers")
    demo.add_argument("--json", action="store_true", help="print the summary as JSON")
    demo.add_argument("--quiet", action="store_true", help="no progress bar")
    demo.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    choose_keras_backend()
    from .. import demo

    result = demo.run(
        rows=args.rows,
        features=args.features,
        epochs=args.epochs,
        batch_size=args.batch_size,
        data_dir=args.data_dir,
        memory_limit=args.memory_limit,
        verbose=0 if args.quiet else (1 if sys.stdout.isatty() else 2),
    )
    print(json.dumps(asdict(result)) if args.json else demo.summary(result))
    return 0
