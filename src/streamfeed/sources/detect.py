"""Choosing the reader for a path the user gave on the command line.

By file suffix (``.parquet``, ``.csv.gz``, ``.h5``, ...); for a directory, by
the suffixes of the files inside (sub-folders of images are an image
folder). Explicit ``format=`` always wins.
"""

from __future__ import annotations

import collections
import os
from pathlib import Path
from typing import Any, Callable

from ..errors import describe

SUFFIXES = {
    ".parquet": "parquet", ".pq": "parquet", ".parq": "parquet",
    ".csv": "csv", ".tsv": "csv", ".txt": "csv",
    ".h5": "hdf5", ".hdf5": "hdf5", ".hdf": "hdf5",
    ".npy": "numpy", ".npz": "numpy",
    ".tfrecord": "tfrecord", ".tfrecords": "tfrecord", ".tfrec": "tfrecord",
    ".jpg": "images", ".jpeg": "images", ".png": "images", ".webp": "images",
    ".tif": "images", ".tiff": "images", ".bmp": "images", ".gif": "images",
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
        raise ValueError(describe("Cannot tell the format of a file", where=str(path), expected=f"one of the suffixes {sorted(SUFFIXES)}", fix="pass --format"))
    counts = collections.Counter(
        _suffix_format(file.name) for file in path.rglob("*") if file.is_file() and not file.name.startswith((".", "_"))
    )
    counts.pop(None, None)
    if not counts:
        raise ValueError(describe("No files of a known format in the directory", where=str(path), fix="pass --format"))
    return counts.most_common(1)[0][0]


def reader_for(format_name: str) -> Callable[..., Any]:
    """The ``read_<format>`` function; formats whose module is missing say so."""
    from importlib import import_module

    try:
        module = import_module(f"streamfeed.sources.{format_name}")
    except ModuleNotFoundError as exc:
        raise ValueError(f"streamfeed cannot read {format_name!r} yet") from exc
    return getattr(module, f"read_{format_name}")
