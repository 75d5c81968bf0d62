"""``streamfeed inspect``: what is in a dataset, and what will hurt training, before training.

Reads footers, headers and a few sample rows — not the data — unless
``full=True``, which scans everything for exact counts (with a progress bar
on a terminal). One module per format fills the same :class:`InspectReport`
(``images.py`` both image folders and zip archives of them).
"""

from __future__ import annotations

import os
from importlib import import_module
from typing import Literal

from ..errors import ArgumentError, describe
from ..memory import resolve_memory_limit
from ..sources.detect import detect_format
from .quality import quality_report
from .report import Column, InspectReport, InspectWarning

Format = Literal["parquet", "csv", "hdf5", "numpy", "tfrecord", "images", "zip", "webdataset"]
FORMATS: tuple[str, ...] = ("parquet", "csv", "hdf5", "numpy", "tfrecord", "images", "zip", "webdataset")
_MODULES = {"zip": "images"}  # a zip archive of class folders is inspected as the image folder it holds


def inspect(
    path: str | os.PathLike,
    *,
    format: Format | None = None,  # noqa: A002 - the CLI's --format
    full: bool = False,
    sample_rows: int = 5,
    memory_limit: int | None = None,
    quality: bool = False,
    label: str | None = None,
) -> InspectReport:
    """Inspects a file or directory of any supported format.

    Args:
        format: the format; detected from suffixes by default.
        full: scan everything (exact null counts, decode every image)
            instead of metadata and a sample.
        sample_rows: sample values shown per column.
        memory_limit: the pipeline's memory limit that row groups are
            checked against and samples decode within (None: the library's
            default, :func:`streamfeed.memory.resolve_memory_limit`).
        quality: also run :func:`streamfeed.inspect.quality.quality_report` (one
            pass over the data) and attach it as ``report.quality``.
        label: the label column for the quality report.
    """
    path = os.fspath(path)
    chosen = format or detect_format(path)
    if chosen not in FORMATS:
        raise ArgumentError(describe("Unknown format", expected=f"one of {FORMATS}", found=repr(chosen)))
    report = InspectReport(path=path, format=chosen)
    module = import_module(f".{_MODULES.get(chosen, chosen)}", __name__)
    limit = resolve_memory_limit(memory_limit)  # the format modules take the limit in force, an int
    getattr(module, f"inspect_{chosen}")(path, full=full, sample_rows=sample_rows, memory_limit=limit, report=report)
    if quality:
        report.quality = quality_report(path, format=chosen, label=label).to_dict()
    return report


__all__ = ["Column", "InspectReport", "InspectWarning", "inspect"]
