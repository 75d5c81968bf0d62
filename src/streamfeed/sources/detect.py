"""Choosing the format, and opening the source, for a path the user gave.

By file suffix (``.parquet``, ``.csv.gz``, ``.h5``, ...); for a directory, by
the suffixes of the files inside (sub-folders of images are an image
folder; ``.tar`` shards are WebDataset). A local file without a telling
suffix is judged by its first bytes: a zip archive (``PK``) is an image
archive for ``read_images``, a tar (``ustar`` at byte 257) a WebDataset
shard. A directory holding files of several formats is refused, naming
what it holds: picking the most common one silently would read an image
folder where the user meant the Parquet files beside it. ``.txt`` files
count as CSV only where nothing else is (a README beside the data is a
note). Explicit ``format=`` always wins.
"""

from __future__ import annotations

import collections
import os
from importlib import import_module
from pathlib import Path
from typing import Any

from ..core import Source
from ..errors import ArgumentError, BadInputReport, NotFoundError, describe

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
    ".zip": "zip",
    ".tar": "webdataset",
}
ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # a local file header; an empty archive's end record
TAR_MAGIC = (257, b"ustar")  # POSIX/GNU tar: the magic field of the first 512-byte header
_COMPRESSION = (".gz", ".bz2", ".zst", ".zstd")
_NOTES = (".txt",)  # read as CSV only when a directory holds nothing else
_GLOB = ("*", "?", "[")


def _suffix_format(name: str) -> str | None:
    lowered = name.lower()
    for compressed in _COMPRESSION:
        if lowered.endswith(compressed):
            lowered = lowered[: -len(compressed)]
    return SUFFIXES.get(os.path.splitext(lowered)[1])


def detect_format(path: str | os.PathLike) -> str:
    """The format of a file or directory, from suffixes; raises if it is unclear or the path is missing."""
    text = os.fspath(path)
    path = Path(text)
    if not path.is_dir():
        found = _suffix_format(path.name) or _content_format(text)
        if found:
            return found
        if "://" not in text and not any(char in text for char in _GLOB) and not path.exists():
            raise NotFoundError(describe("No such file or directory", where=text, fix="check the path"))
        raise ArgumentError(
            describe(
                "Cannot tell the format of a file",
                where=str(path),
                expected=f"one of the suffixes {sorted(SUFFIXES)}, or a zip archive or tar shard by its first bytes",
                fix="pass --format",
            )
        )
    counts: collections.Counter[str] = collections.Counter()
    examples: dict[str, str] = {}  # the first file of each format, to name in a message
    others: list[str] = []  # files of no known format (data.json beside a readme.txt)
    for file in path.rglob("*"):
        if file.name.startswith((".", "_")) or not file.is_file():
            continue
        name = _suffix_format(file.name)
        if name is None:
            others.append(str(file.relative_to(path)))
            continue
        key = "notes" if _is_note(file.name) else name
        counts[key] += 1
        examples.setdefault(key, str(file.relative_to(path)))
    notes = counts.pop("notes", 0)
    if not counts and notes and not others:  # only .txt files: they are the data
        counts["csv"], examples["csv"] = notes, examples["notes"]
    if not counts:
        held = sorted(others + ([examples["notes"]] if notes else []))
        raise NotFoundError(
            describe(
                "No data file in the directory",
                where=str(path),
                expected=f"files with a data suffix ({', '.join(sorted(SUFFIXES))})",
                found=("only " + ", ".join(held[:5]) + (f" and {len(held) - 5} more" if len(held) > 5 else ""))
                if held
                else "an empty directory",
                fix="check the path" if not held else "point at the data, or pass --format (format=) if these are it",
            )
        )
    if len(counts) > 1:
        ranked = sorted(counts, key=lambda name: (-counts[name], name))
        raise ArgumentError(
            describe(
                "The directory holds files of several formats",
                where=str(path),
                found="; ".join(f"{counts[name]} {name} (such as {examples[name]})" for name in ranked),
                fix="pass --format " + " or --format ".join(ranked) + ", or point at one format's files "
                "(a sub-directory or a glob)",
            )
        )
    return next(iter(counts))


def _content_format(text: str) -> str | None:
    """``"zip"`` or ``"webdataset"`` for a local file whose first bytes say so; None otherwise (or for a URI).

    A URI is judged by its name only: no request is made to find out.
    """
    if "://" in text or not os.path.isfile(text):
        return None
    try:
        with open(text, "rb") as handle:
            head = handle.read(TAR_MAGIC[0] + len(TAR_MAGIC[1]))
    except OSError:
        return None
    if head[:4] in ZIP_MAGIC:
        return "zip"
    if head[TAR_MAGIC[0] :].startswith(TAR_MAGIC[1]):
        return "webdataset"
    return None


def _is_note(name: str) -> bool:
    lowered = name.lower()
    for compressed in _COMPRESSION:
        if lowered.endswith(compressed):
            return False
    return lowered.endswith(_NOTES)


_SOURCE_CLASSES = {
    "parquet": ("parquet", "ParquetSource"),
    "csv": ("csv", "CsvSource"),
    "hdf5": ("hdf5", "HDF5Source"),
    "numpy": ("numpy", "NumpySource"),
    "images": ("images", "ImageSource"),
    "tfrecord": ("tfrecord", "TFRecordSource"),
    "zip": ("zip", "ZipImageSource"),
    "webdataset": ("webdataset", "WebDatasetSource"),
}
FORMATS: tuple[str, ...] = tuple(_SOURCE_CLASSES)


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
    if name == "zip":  # the archive's images undecoded unless a decode spec is given: what inspect looks at
        options.setdefault("decode", "spec" in options)
        options.setdefault("spec", import_module(f"{__package__}.images.decode").DecodeSpec(224, 224))
    return getattr(source_module, cls)(path, report=report, **options)
