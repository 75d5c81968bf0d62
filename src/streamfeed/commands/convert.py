"""``streamfeed convert``: any source to sharded Parquet or TFRecord.

The destination directory appears whole, with its manifest, or not at all;
an existing non-empty one is refused unless ``--overwrite`` and it holds a
previous output, which is then replaced atomically (``writers/publish.py``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def register(commands: argparse._SubParsersAction) -> None:
    convert = commands.add_parser("convert", help="rewrite any supported source as sharded Parquet or TFRecord")
    convert.add_argument("source", help="file, directory or glob")
    convert.add_argument(
        "destination", type=Path, help="directory for the part-NNNNN files and their manifest (published whole)"
    )
    convert.add_argument("--format", default=None, help="source format (default: detected from suffixes)")
    convert.add_argument("--to", choices=["parquet", "tfrecord"], default="parquet", help="output format")
    convert.add_argument("--compression", choices=["GZIP"], default=None, help="TFRecord compression")
    convert.add_argument("--shard-rows", type=int, default=1_000_000, help="rows per output file")
    convert.add_argument(
        "--on-error", choices=["raise", "skip"], default="raise", help="skip unreadable input and report it"
    )
    convert.add_argument("--report", type=Path, default=None, help="write skipped input as JSON lines here")
    convert.add_argument(
        "--overwrite", action="store_true", help="replace a previous output in DESTINATION (atomically)"
    )
    convert.add_argument("--json", action="store_true", help="print the summary as JSON")
    convert.add_argument("--quiet", action="store_true", help="no progress bar")
    convert.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..convert import convert_to_parquet, convert_to_tfrecord
    from ..readers import reader_for
    from ..sources.detect import detect_format

    source_format = args.format or detect_format(args.source)
    # images are stored encoded: smaller than pixels, and decoding them back is fast
    options = {"decode": False} if source_format == "images" else {}
    dataset = reader_for(source_format)(args.source, on_error=args.on_error, report_path=args.report, **options)
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
