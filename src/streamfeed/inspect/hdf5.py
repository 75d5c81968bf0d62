"""Inspecting HDF5: the tree of groups and datasets with shapes, dtypes, chunking and filters.

A dataset whose bytes live in another file (external raw storage, a
virtual dataset over other files) is listed with ``storage`` and the
``external_files`` it names, and a warning, but never read: sampling it
would print that file's bytes (``/etc/passwd``), which the reader refuses
to serve too.
"""

from __future__ import annotations

import os

import numpy as np

from ..errors import require
from ..sources._paths import resolve_files
from ..sources.hdf5 import outside_data
from .report import Column, InspectReport, add_files, index_like, sample_values, warn_index

_INDEX_PROBE_ROWS = 1000


def inspect_hdf5(path: str, *, full: bool, sample_rows: int, memory_limit: int | None, report: InspectReport) -> None:
    h5py = require("h5py", "hdf5")
    files = list(resolve_files(path, suffixes=(".h5", ".hdf5", ".hdf", ".he5")).files)
    add_files(report, files, [os.path.getsize(file) for file in files])
    trees = []
    for file_index, file in enumerate(files):
        tree: list[dict] = []
        with h5py.File(file, "r") as handle:
            # called only by visititems below, within this iteration; the loop variables are bound explicitly
            def visit(name: str, obj, tree=tree, file_index=file_index, file=file) -> None:
                if isinstance(obj, h5py.Group):
                    tree.append({"path": "/" + name, "kind": "group", "members": len(obj)})
                    return
                if not isinstance(obj, h5py.Dataset):
                    return
                entry = {
                    "path": "/" + name,
                    "kind": "dataset",
                    "shape": list(obj.shape),
                    "dtype": str(obj.dtype),
                    "chunks": list(obj.chunks) if obj.chunks else None,
                    "compression": obj.compression,
                    "compression_opts": obj.compression_opts,
                    "shuffle": bool(obj.shuffle),
                }
                tree.append(entry)
                outside = outside_data(handle, obj.name)
                if outside:
                    _warn_outside(report, entry, obj, outside, file)
                    return
                if file_index or not obj.shape:
                    return
                head = obj[: max(sample_rows, _INDEX_PROBE_ROWS)] if obj.dtype.names is None else obj[:sample_rows]
                column = Column(
                    name="/" + name,
                    type=str(obj.dtype),
                    shape=list(obj.shape[1:]),
                    samples=sample_values(np.asarray(head), sample_rows),
                )
                if full and obj.dtype.kind == "f":
                    column.nulls, column.nulls_exact = int(np.count_nonzero(np.isnan(obj[...]))), True
                report.columns.append(column)
                if obj.ndim == 1 and index_like(name.rsplit("/", 1)[-1], np.asarray(head)):
                    warn_index(report, "/" + name, file)

            handle.visititems(visit)
        trees.append({"file": file, "objects": tree})
    report.details["tree"] = trees[:5]
    report.rows = _rows_of_all(trees)
    report.rows_exact = report.rows is not None


def _warn_outside(report: InspectReport, entry: dict, obj, outside: list, file: str) -> None:
    """Marks a dataset stored in other files in the tree, and warns; its bytes are not read."""
    entry["storage"] = "virtual" if obj.is_virtual else "external"
    entry["external_files"] = sorted({item.file for item in outside})
    report.warn(
        "external_storage",
        f"Dataset {obj.name} keeps its data in another file; it was not read, and read_hdf5 refuses it",
        where=f"{file}, dataset {obj.name}",
        found="; ".join(str(item) for item in outside),
        fix="copy the data into the file, or read with allow_external=True if you trust the files it names",
    )


def _rows_of_all(trees: list[dict]) -> int | None:
    """Rows over all files: the common first dimension of each file's datasets."""
    total = 0
    for tree in trees:
        lengths = {obj["shape"][0] for obj in tree["objects"] if obj["kind"] == "dataset" and obj["shape"]}
        if len(lengths) != 1:
            return None
        total += lengths.pop()
    return total
