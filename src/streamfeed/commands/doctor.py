"""``streamfeed doctor``: run the pipeline briefly on real data and say what would repair it, each finding measured.

Three measurements share the ``--seconds`` budget (default 10 s), each in a
module of its own:

1. the pipeline itself, shuffled and batched as training reads it, with
   stage metrics on (``diagnostics.bench``) and the run-time autotuner on
   (``with_options(autotune=True)``) unless ``--read-threads`` is given:
   rows/s, read threads and how busy they were, the stage that sets the
   pace, the buffers against the memory limit, and the settings the
   autotuner reached (``doctor_pipeline``);
2. the conversion cache's own measurement (``cache.probe_cache``,
   what ``cache(mode="auto")`` decides from) on fragments spread over the
   data: reading the rows from the source against reading the same rows
   back from a cache part; and whole epochs of the same pipeline over those
   fragments, from the source and from a cache of them in a temporary
   directory; both repeated in rounds until their intervals are narrow or
   decide, within the budget the finding states (``doctor_cache``);
3. the quality pass of ``inspect --quality`` (nulls, duplicates, row order,
   constant columns, label imbalance; for images blur, exposure,
   undecodable files, size and mode outliers, duplicate files) on as many
   rows or images as the remaining time allows (``doctor_quality``).

This module keeps the command: its flags, opening the data, sharing the
budget, and the result that ``doctor_findings`` prints as text or JSON.

Label noise is not estimated: it needs a model trained for some epochs
(``keras.DataQualityMonitor`` during ``fit``), which is not a few seconds'
work on data alone. A source the pipeline cannot read (a null under the
default ``--nulls raise``, a corrupt file) fails as every command fails:
the error with its fix, exit code 1; a wrong path or flag exits with 2.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict

from ..errors import ArgumentError, describe
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
from .doctor_cache import CACHE_SHARE, cache_finding
from .doctor_findings import Finding, render, to_json
from .doctor_pipeline import tuning_finding
from .doctor_quality import quality_findings

PIPELINE_SHARE = 0.4  # of --seconds; the cache measurement has CACHE_SHARE, the quality pass the rest


def register(commands: argparse._SubParsersAction) -> None:
    doctor = commands.add_parser(
        "doctor", help="run a pipeline briefly on real data and say what would repair it (measured)"
    )
    doctor.add_argument("path", help=DATA_HELP)
    add_format(doctor)
    doctor.add_argument("--seconds", type=float, default=10.0, help="about how long to measure, in all (default 10)")
    doctor.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help=f"rows per batch (default {DEFAULT_BATCH_SIZE:,}, or fewer if they do not fit --memory-limit: images)",
    )
    doctor.add_argument("--read-threads", type=int, default=None, help="read threads (default: min(4, CPUs))")
    doctor.add_argument("--label", default=None, help="label column: its class balance is checked")
    add_memory_limit(doctor)
    add_reading(doctor)
    doctor.add_argument("--json", action="store_true", help="print the findings as JSON (the whole of stdout)")
    doctor.add_argument("--quiet", action="store_true", help="no progress bars")
    doctor.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if not args.seconds > 0:
        raise ArgumentError(describe("--seconds must be positive", found=str(args.seconds), fix="pass --seconds 10"))
    started = time.perf_counter()
    format_given = bool(args.format)  # open_dataset sets args.format to the detected one
    named = {"--columns": names(args.columns), "--label": [args.label] if args.label else []}
    read = list(dict.fromkeys(sum(named.values(), []))) if named["--columns"] else None
    source_format, dataset = open_dataset(args, args.path, read=read, named=named)
    dataset = dataset.shuffle(seed=0).with_options(memory_limit=args.memory_limit, read_threads=args.read_threads)
    dataset = batched(dataset, args.batch_size, command="doctor")
    progress = False if args.json else None
    budget = args.seconds
    findings: list[Finding] = []
    findings.append(tuning_finding(dataset, PIPELINE_SHARE * budget, progress=progress))
    findings.append(cache_finding(dataset, source_format, CACHE_SHARE * budget))
    remaining = budget - (time.perf_counter() - started)
    findings += quality_findings(
        dataset,
        args.path,
        source_format,
        max(remaining, 0.1 * budget),
        label=args.label,
        format_given=format_given,
        progress=progress,
    )
    fragments = dataset.source.fragments
    result = {
        "data": args.path,
        "format": source_format,
        "files": len(dataset.source.files),
        "rows": int(sum(fragment.num_rows for fragment in fragments)),
        "rows_exact": bool(dataset.source.exact_counts),
        "seconds": time.perf_counter() - started,
        "findings": [asdict(finding) for finding in findings],
        "repairs": sum(finding.repair for finding in findings),
    }
    print(to_json(result) if args.json else render(result), file=args.out)
    return 0
