"""Choosing the format, and opening the source, for a path the user gave.

By file suffix (``.parquet``, ``.csv.gz``, ``.h5``, ...); for a directory, by
the suffixes of the files inside (sub-folders of images are an image
folder). Explicit ``format=`` always wins.
"""

from __future__ import annotations

import collections
import os
from importlib import import_module
from pathlib import Path
from typing import Any

from ..core import Source
from ..errors import ArgumentError, BadInputReport, describe

SUFFIXES = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".parq": "parquet",
    ".csv": "csv",
    ".tsv": "csv",
    ".txt": "csv",
    ".h5": "hdf5",
    ".hdf5": "hdf5",
    ".hdf": "hdf5",
    ".npy": "numpy",
    ".npz": "numpy",
    ".tfrecord": "tfrecord",
    ".tfrecords": "tfrecord",
    ".tfrec": "tfrecord",
    ".jpg": "images",
    ".jpeg": "images",
    ".png": "images",
    ".webp": "images",
    ".tif": "images",
    ".tiff": "images",
    ".bmp": "images",
    ".gif": "images",
}
_COMPRESSION = (".gz", ".bz2", ".zst", ".zstd")


def _suffix_format(name: str) -> str | None:
    lowered = name.lower()
    for compressed in _COMPRESSION:
        if lowered.endswith(compressed):
            lowered = lowered[: -len(compressed)]
    return SUFFIXES.get(os.path.splitext(lowered)[1])


def detect_format(path: str | os.PathLike) -> str:
    """The format of a file or directory, from suffixes; raises if unclear."""
    path = Path(path)
    if not path.is_dir():
        found = _suffix_format(path.name)
        if found:
            return found
        raise ArgumentError(
            describe(
                "Cannot tell the format of a file",
                where=str(path),
                expected=f"one of the suffixes {sorted(SUFFIXES)}",
                fix="pass --format",
            )
        )
    counts = collections.Counter(
        _suffix_format(file.name) for file in path.rglob("*") if file.is_file() and not file.name.startswith((".", "_"))
    )
    counts.pop(None, None)
    if not counts:
        raise ArgumentError(
            describe("No files of a known format in the directory", where=str(path), fix="pass --format")
        )
    return str(counts.most_common(1)[0][0])


_SOURCE_CLASSES = {
    "parquet": ("parquet", "ParquetSource"),
    "csv": ("csv", "CsvSource"),
    "hdf5": ("hdf5", "HDF5Source"),
    "numpy": ("numpy", "NumpySource"),
    "images": ("images", "ImageSource"),
    "tfrecord": ("tfrecord", "TFRecordSource"),
}


def open_source(
    path: Any, format: str | None = None, *, report: BadInputReport | None = None, **options: Any
) -> Source:
    """Opens ``path`` as its format's :class:`~streamfeed.core.Source` (the format detected if not given).

    ``options`` are the source class's own keyword arguments (for example
    ``columns=`` or ``policy=ColumnPolicy(nulls="fill")``); ``report``
    carries the bad-input policy. Only the format's module is imported.
    """
    name = format or detect_format(path)
    if name not in _SOURCE_CLASSES:
        raise ArgumentError(describe("Unknown format", expected=f"one of {sorted(_SOURCE_CLASSES)}", found=repr(name)))
    module, cls = _SOURCE_CLASSES[name]
    source_module = import_module(f"{__package__}.{module}")
    if name == "numpy":  # a NumPy source is opened from named columns: a path is the x column (or a whole .npz)
        path = source_module.numpy_columns(path, None, None)
    return getattr(source_module, cls)(path, report=report, **options)
