"""Inspecting HDF5: the tree of groups and datasets with shapes, dtypes, chunking and filters.

A dataset whose bytes live in another file (external raw storage, a
virtual dataset over other files) is listed with ``storage`` and the
``external_files`` it names, and a warning, but never read: sampling it
would print that file's bytes (``/etc/passwd``), which the reader refuses
to serve too.

Only a bounded sample is decoded. HDF5 decompresses whole chunks, so the
bytes a read decodes (every chunk it touches, from the shape, dtype and
chunk shape) are checked against a quarter of the memory limit before
reading; ``full=True`` counts NaN in row blocks of a few MiB (at least one
chunk's rows).
"""

from __future__ import annotations

import os

import numpy as np

from ..errors import require
from ..files.paths import resolve_files
from ..memory import decode_bytes_limit
from ..sources.hdf5.guard import outside_data
from ..sources.hdf5.names import default_name
from .numpy import SCAN_BYTES
from .report import Column, InspectReport, add_files, index_like, sample_values, warn_index

_INDEX_PROBE_ROWS = 1000


def inspect_hdf5(path: str, *, full: bool, sample_rows: int, memory_limit: int, report: InspectReport) -> None:
    h5py = require("h5py", "hdf5")
    files = list(resolve_files(path, suffixes=(".h5", ".hdf5", ".hdf", ".he5")).files)
    add_files(report, files, [os.path.getsize(file) for file in files])
    budget = max(1, decode_bytes_limit(memory_limit))
    not_sampled: list[str] = []
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
                served = default_name(name) if obj.dtype.names is None else "/" + name  # a table: by its fields
                column = Column(name=served, type=str(obj.dtype), shape=list(obj.shape[1:]))
                report.columns.append(column)
                step, most = _rows_per_read(obj, budget)
                if most == 0:
                    not_sampled.append(
                        f"/{name}: a read decodes whole chunks, and one chunk's rows are over {budget:,} bytes "
                        "(a quarter of the memory limit)"
                    )
                    return
                wanted = max(sample_rows, _INDEX_PROBE_ROWS) if obj.dtype.names is None else sample_rows
                head = np.asarray(obj[: min(wanted, most)])
                column.samples = sample_values(head, sample_rows)
                if full and obj.dtype.kind == "f":
                    row_bytes = max(1, obj.dtype.itemsize * int(np.prod(obj.shape[1:], dtype=np.int64)))
                    block = min(most, max(step, SCAN_BYTES // row_bytes // step * step))
                    nans = sum(
                        int(np.count_nonzero(np.isnan(obj[start : start + block])))
                        for start in range(0, obj.shape[0], block)
                    )
                    column.nulls, column.nulls_exact = nans, True
                if obj.ndim == 1 and index_like(name.rsplit("/", 1)[-1], head):
                    warn_index(report, served, file)

            handle.visititems(visit)
        trees.append({"file": file, "objects": tree})
    report.details["tree"] = trees[:5]
    if not_sampled:
        report.details["not_sampled"] = not_sampled
    report.rows = _rows_of_all(trees)
    report.rows_exact = report.rows is not None


def _rows_per_read(obj, budget: int) -> tuple[int, int]:
    """The dataset's chunk rows, and the most rows one read may ask for while decoding at most ``budget`` bytes.

    A read decodes every chunk it touches whole (across the full row), so
    rows are counted in whole chunks along axis 0; the most is 0 when one
    chunk alone is over the budget.
    """
    step = obj.chunks[0] if obj.chunks else 1
    row_bytes = obj.dtype.itemsize * int(np.prod(obj.shape[1:], dtype=np.int64))
    if not row_bytes:
        return step, max(1, obj.shape[0])
    if obj.chunks and obj.dtype.itemsize * int(np.prod(obj.chunks, dtype=np.int64)) > budget:
        return step, 0
    return step, budget // (step * row_bytes) * step


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
