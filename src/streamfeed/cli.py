"""The ``streamfeed`` command: a thin layer over the library.

Each sub-command parses its options and calls one library function;
``main(argv) -> int`` is what the tests call in-process.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Sequence


def choose_keras_backend() -> str:
    """Keeps the user's KERAS_BACKEND; otherwise the first installed of TF, JAX, torch.

    Keras defaults to TensorFlow even when only JAX or torch is installed;
    the demo must run on whichever backend the machine has.
    """
    import importlib.util
    import os

    configured = os.environ.get("KERAS_BACKEND") or _keras_config_backend()
    if configured:
        return configured
    for backend, module in (("tensorflow", "tensorflow"), ("jax", "jax"), ("torch", "torch")):
        if importlib.util.find_spec(module) is not None:
            os.environ["KERAS_BACKEND"] = backend
            return backend
    raise SystemExit("No Keras backend is installed: pip install 'streamfeed[tensorflow]' (or [jax], [torch])")


def _keras_config_backend() -> str | None:
    config = Path(os.environ.get("KERAS_HOME", Path.home() / ".keras")) / "keras.json"
    try:
        return json.loads(config.read_text()).get("backend")
    except (OSError, ValueError):
        return None


def _demo(args: argparse.Namespace) -> int:
    choose_keras_backend()
    from . import demo

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


def _convert(args: argparse.Namespace) -> int:
    from .convert import convert_to_parquet, convert_to_tfrecord
    from .sources.detect import detect_format, reader_for

    source_format = args.format or detect_format(args.source)
    # images are stored encoded: smaller than pixels, and decoding them back is fast
    options = {"decode": False} if source_format == "images" else {}
    dataset = reader_for(source_format)(args.source, on_error=args.on_error, report_path=args.report, **options)
    progress = not args.quiet and sys.stderr.isatty()
    if args.to == "tfrecord":
        summary = convert_to_tfrecord(dataset, args.destination, shard_rows=args.shard_rows, compression=args.compression)
    else:
        summary = convert_to_parquet(dataset, args.destination, shard_rows=args.shard_rows, progress=progress)
    if args.json:
        print(json.dumps(summary.to_dict()))
    else:
        skipped = summary.skipped
        print(
            f"converted {summary.rows:,} rows of {source_format} into {len(summary.files)} {args.to} file(s) "
            f"in {summary.destination} ({summary.bytes_written / 2**20:,.1f} MiB, {summary.seconds:,.1f} s); "
            f"skipped {skipped['skipped_units']} unit(s), {skipped['skipped_rows']} row(s)"
        )
        for entry in skipped["entries"]:
            print(f"  skipped {entry['path']} ({entry['location']}): {entry['reason']}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="streamfeed", description="Stream larger-than-memory data into Keras 3.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="generate a synthetic Parquet dataset (cached) and train a Keras model on it")
    demo.add_argument("--rows", type=int, default=2_000_000, help="rows to generate (default 2,000,000; may exceed RAM)")
    demo.add_argument("--features", type=int, default=32)
    demo.add_argument("--epochs", type=int, default=2)
    demo.add_argument("--batch-size", type=int, default=1024)
    demo.add_argument("--data-dir", type=Path, default=None, help="cache directory (default ~/.cache/streamfeed/demo)")
    demo.add_argument("--memory-limit", type=int, default=None, help="bytes for the pipeline's buffers")
    demo.add_argument("--json", action="store_true", help="print the summary as JSON")
    demo.add_argument("--quiet", action="store_true", help="no progress bar")
    demo.set_defaults(run=_demo)

    convert = commands.add_parser("convert", help="rewrite any supported source as sharded Parquet or TFRecord")
    convert.add_argument("source", help="file, directory or glob")
    convert.add_argument("destination", type=Path, help="directory for the part-NNNNN files")
    convert.add_argument("--format", default=None, help="source format (default: detected from suffixes)")
    convert.add_argument("--to", choices=["parquet", "tfrecord"], default="parquet", help="output format")
    convert.add_argument("--compression", choices=["GZIP"], default=None, help="TFRecord compression")
    convert.add_argument("--shard-rows", type=int, default=1_000_000, help="rows per output file")
    convert.add_argument("--on-error", choices=["raise", "skip"], default="raise", help="skip unreadable input and report it")
    convert.add_argument("--report", type=Path, default=None, help="write skipped input as JSON lines here")
    convert.add_argument("--json", action="store_true", help="print the summary as JSON")
    convert.add_argument("--quiet", action="store_true", help="no progress bar")
    convert.set_defaults(run=_convert)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    try:
        return args.run(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
