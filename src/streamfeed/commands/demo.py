"""``streamfeed demo``: generate a Parquet dataset once and train on it; ``--bound``: stream one 8x the memory limit.

Each step is said on stderr as it starts (opening, loading Keras, counted,
first batch), so a cached run is not silent for the seconds Keras takes to
load; ``--quiet`` says nothing but the summary.
"""

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
        "--rows",
        type=int,
        default=None,
        help="rows to generate (default 2,000,000; with --bound, 8x the memory limit on disk; may exceed RAM)",
    )
    demo.add_argument("--features", type=int, default=32, help="feature columns to generate (default 32)")
    demo.add_argument("--epochs", type=int, default=2, help="epochs to train (default 2)")
    demo.add_argument("--batch-size", type=int, default=1024, help="rows per batch (default 1024)")
    demo.add_argument("--data-dir", type=Path, default=None, help="cache directory (default ~/.cache/streamfeed/demo)")
    add_memory_limit(demo)
    demo.add_argument(
        "--bound",
        action="store_true",
        help="show the memory bound instead of training: a dataset 8x --memory-limit (default 64MiB here) "
        "streamed through the shuffled pipeline without a model, with peak RSS printed against the limit",
    )
    demo.add_argument("--json", action="store_true", help="print the summary as JSON (the whole of stdout)")
    demo.add_argument("--quiet", action="store_true", help="no progress bar")
    demo.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from .. import demo

    say = demo.say_nothing if args.quiet else _say
    memory_limit = args.memory_limit or (demo.BOUND_MEMORY_LIMIT if args.bound else None)
    rows = args.rows
    if rows is None:
        rows = demo.bound_rows(memory_limit, args.features) if memory_limit and args.bound else demo.DEFAULT_ROWS
    directory = demo.data_directory(args.data_dir)
    target = demo.dataset_path(directory, rows, args.features)
    if not demo.is_generated(target):
        size = demo.estimated_bytes(rows, args.features)
        say(
            f"generating the dataset (first run only; later runs reuse it): {rows:,} rows "
            f"x {args.features} float32 features, about {size / 2**20:,.1f} MiB, in {target}"
        )
        demo.generate(directory, rows, args.features)  # before Keras loads: the bar shows at once
    say(f"opening {target}")
    if args.bound:
        assert memory_limit is not None
        bound = demo.run_bound(
            rows=rows,
            features=args.features,
            epochs=args.epochs,
            batch_size=args.batch_size,
            data_dir=args.data_dir,
            memory_limit=memory_limit,
            say=say,
        )
        print(json.dumps(asdict(bound)) if args.json else demo.bound_summary(bound), file=args.out)
        return 0
    say("loading Keras")
    load_keras(silence=not args.debug)
    result = demo.run(
        rows=rows,
        features=args.features,
        epochs=args.epochs,
        batch_size=args.batch_size,
        data_dir=args.data_dir,
        memory_limit=memory_limit,
        # Keras prints to stdout, which the CLI points at stderr: live on a terminal, one line per epoch in a log
        verbose=0 if args.quiet else (1 if sys.stderr.isatty() else 2),
        say=say,
    )
    print(json.dumps(asdict(result)) if args.json else demo.summary(result), file=args.out)
    return 0


def _say(text: str) -> None:
    """One step of the demo, on stderr at once (stdout is the summary, or the JSON)."""
    print(f"streamfeed demo: {text}", file=sys.stderr, flush=True)
