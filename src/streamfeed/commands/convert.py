"""``streamfeed convert``: any source to sharded Parquet or TFRecord.

The destination directory appears whole, with its manifest, or not at all;
an existing non-empty one is refused unless ``--overwrite`` and it holds a
previous output, which is then replaced atomically (``files/publish.py``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ._options import (
    DATA_HELP,
    IMAGE_FORMATS,
    add_format,
    add_memory_limit,
    add_reading,
    detected_format,
    names,
    open_dataset,
)


def register(commands: argparse._SubParsersAction) -> None:
    convert = commands.add_parser("convert", help="rewrite any supported source as sharded Parquet or TFRecord")
    convert.add_argument("source", help=DATA_HELP)
    convert.add_argument(
        "destination", type=Path, help="directory for the part-NNNNN files and their manifest (published whole)"
    )
    add_format(convert)
    convert.add_argument("--to", choices=["parquet", "tfrecord"], default="parquet", help="output format")
    convert.add_argument("--compression", choices=["GZIP"], default=None, help="TFRecord compression")
    convert.add_argument("--shard-rows", type=int, default=1_000_000, help="rows per output file")
    add_reading(convert)
    convert.add_argument(
        "--seed", type=int, default=None, help="shuffle the rows with this seed as they are written (default: in order)"
    )
    add_memory_limit(convert)
    convert.add_argument("--report", type=Path, default=None, help="write skipped input as JSON lines here")
    convert.add_argument(
        "--overwrite", action="store_true", help="replace a previous output in DESTINATION (atomically)"
    )
    convert.add_argument("--json", action="store_true", help="print the summary as JSON (the whole of stdout)")
    convert.add_argument("--quiet", action="store_true", help="no progress bar")
    convert.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..convert import convert_to_parquet, convert_to_tfrecord

    # images are stored encoded: smaller than pixels, and decoding them back is fast
    options = {"decode": False} if detected_format(args, args.source) in IMAGE_FORMATS else {}
    columns = names(args.columns)
    _, dataset = open_dataset(
        args, args.source, read=columns or None, named={"--columns": columns}, report_path=args.report, **options
    )
    if args.seed is not None:
        dataset = dataset.shuffle(seed=args.seed)
    dataset = dataset.with_options(memory_limit=args.memory_limit)
    if args.to == "tfrecord":
        summary = convert_to_tfrecord(
            dataset,
            args.destination,
            shard_rows=args.shard_rows,
            compression=args.compression,
            overwrite=args.overwrite,
        )
    else:
        summary = convert_to_parquet(
            dataset, args.destination, shard_rows=args.shard_rows, progress=None, overwrite=args.overwrite
        )
    if args.json:
        print(json.dumps(summary.to_dict()), file=args.out)
    else:
        skipped = summary.skipped
        print(
            f"converted {summary.rows:,} rows of {args.format} into {len(summary.files)} {args.to} file(s) "
            f"in {summary.destination} ({summary.bytes_written / 2**20:,.1f} MiB, {summary.seconds:,.1f} s); "
            f"skipped {skipped['skipped_units']} unit(s), {skipped['skipped_rows']} row(s)",
            file=args.out,
        )
        for entry in skipped["entries"]:
            print(f"  skipped {entry['path']} ({entry['location']}): {entry['reason']}", file=args.out)
    return 0
