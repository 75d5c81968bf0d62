"""``streamfeed bench``: the pipeline doctor — throughput, stage times and a verdict."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..errors import describe
from ..inspect.report import index_like
from ..runtime.autotune import TuningReport
from ._backend import load_keras
from ._options import (
    DATA_HELP,
    DEFAULT_BATCH_SIZE,
    add_format,
    add_memory_limit,
    add_reading,
    batched,
    names,
    open_dataset,
)
from .failure import usage


def register(commands: argparse._SubParsersAction) -> None:
    bench = commands.add_parser("bench", help="run a pipeline briefly and name its slowest stage")
    bench.add_argument("path", help=DATA_HELP)
    add_format(bench)
    bench.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help=f"rows per batch (default {DEFAULT_BATCH_SIZE:,}, or fewer if they do not fit --memory-limit: images)",
    )
    bench.add_argument(
        "--seed", "--shuffle-seed", dest="seed", type=int, default=0, help="seed of the shuffle (default 0)"
    )
    bench.add_argument("--no-shuffle", action="store_true", help="read in source order")
    bench.add_argument("--seconds", type=float, default=10.0, help="run for about this long (default 10)")
    bench.add_argument("--max-batches", type=int, default=None, help="stop after this many batches")
    bench.add_argument(
        "--read-threads", type=int, default=None, help="read threads (default: at most 4, at most the cores)"
    )
    bench.add_argument(
        "--autotune",
        action="store_true",
        help="move read threads, read-ahead and prefetch during the run (within --memory-limit); "
        "the report shows the settings it converged to",
    )
    add_memory_limit(bench)
    add_reading(bench)
    bench.add_argument(
        "--model",
        choices=["demo"],
        default=None,
        help="feed a real fit loop: 'demo' is the demo's small Dense model (tabular data)",
    )
    bench.add_argument("--label", default=None, help="label column (needed with --model)")
    bench.add_argument(
        "--features",
        default=None,
        metavar="A,B",
        help="comma-separated model inputs with --model (default: every column but the label and row indexes)",
    )
    bench.add_argument("--json", action="store_true", help="print the report as JSON (the whole of stdout)")
    bench.add_argument("--quiet", action="store_true", help="no progress bar")
    bench.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.model and not args.label:
        return usage(args, describe("--model needs the label column", fix="pass --label COLUMN"))
    features = names(args.features)
    if features and not args.model:
        return usage(args, describe("--features names the model's inputs", fix="pass --model demo with --label"))
    named = {"--columns": names(args.columns), "--features": features, "--label": [args.label] if args.label else []}
    read = list(dict.fromkeys(sum(named.values(), []))) if named["--columns"] or features else None
    _, dataset = open_dataset(args, args.path, read=read, named=named)
    if not args.no_shuffle:
        dataset = dataset.shuffle(seed=args.seed)
    dataset = dataset.with_options(
        memory_limit=args.memory_limit, read_threads=args.read_threads, autotune=True if args.autotune else None
    )
    dataset = batched(dataset, args.batch_size, command="bench")
    model = None
    if args.model == "demo":
        load_keras(silence=not args.debug)
        from ..demo import build_model

        features = features or feature_columns(dataset, args.label)
        model = build_model(len(features))
    from ..diagnostics import bench

    report = bench(
        dataset,
        seconds=args.seconds,
        max_batches=args.max_batches,
        model=model,
        label=args.label,
        features=features or None,
        progress=False if args.json else None,
    )
    # the derived datasets bench ran (batched, Keras's) share this Autotune: its report covers every epoch
    tuning = dataset.autotune.report() if dataset.autotune is not None else None
    if args.json:
        print(json.dumps({**report.to_dict(), "autotune": tuning.to_dict() if tuning else None}), file=args.out)
    else:
        from rich.console import Console

        console = Console(file=args.out) if args.out.isatty() else Console(file=args.out, width=130)
        console.print(report.render())
        if tuning is not None:
            console.print(autotune_lines(tuning), highlight=False, markup=False)
    return 0


MAX_DECISION_LINES = 12


def autotune_lines(tuning: TuningReport) -> str:
    """The settings autotuning converged to, then its changes (the last ones if many), one per line."""
    lines = [f"autotuned: {tuning.summary()}"]
    shown = tuning.decisions[-MAX_DECISION_LINES:]
    if len(tuning.decisions) > len(shown):
        lines.append(f"  ... {len(tuning.decisions) - len(shown)} earlier changes")
    for decision in shown:
        change = f"{decision.old} → {decision.new}" if decision.old != decision.new else f"kept {decision.new}"
        where = f"{decision.seconds:7.2f} s, epoch iterator {decision.iterator}"
        lines.append(f"  {where}: {decision.setting} {change}: {decision.reason}")
    return "\n".join(lines)


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
