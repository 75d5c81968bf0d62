"""Inspecting ``.npy``/``.npz``: headers only (dtype, shape, order, compression), plus a few rows."""

from __future__ import annotations

import os
import zipfile

import numpy as np

from ..sources._paths import resolve_files
from .report import Column, InspectReport, add_files, index_like, sample_values, warn_index


def _header(handle) -> tuple[np.dtype, tuple[int, ...], bool]:
    version = np.lib.format.read_magic(handle)
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran, dtype = read(handle)
    return dtype, shape, fortran


def inspect_numpy(path: str, *, full: bool, sample_rows: int, memory_limit: int | None, report: InspectReport) -> None:
    files = list(resolve_files(path, suffixes=(".npy", ".npz")).files)
    add_files(report, files, [os.path.getsize(file) for file in files])
    arrays = []
    for file in files:
        if file.endswith(".npz"):
            with zipfile.ZipFile(file) as archive:
                for info in archive.infolist():
                    with archive.open(info) as member:
                        dtype, shape, fortran = _header(member)
                    compressed = info.compress_type != zipfile.ZIP_STORED
                    arrays.append({"file": file, "name": info.filename.removesuffix(".npy"), "dtype": str(dtype), "shape": list(shape), "fortran_order": fortran, "compressed": compressed})
        else:
            with open(file, "rb") as handle:
                dtype, shape, fortran = _header(handle)
            arrays.append({"file": file, "name": os.path.basename(file).removesuffix(".npy"), "dtype": str(dtype), "shape": list(shape), "fortran_order": fortran, "compressed": False})
    report.details["arrays"] = arrays[:100]
    lengths = {array["shape"][0] for array in arrays if array["shape"]}
    report.rows = lengths.pop() if len(lengths) == 1 else None
    report.rows_exact = report.rows is not None
    if len(lengths) > 0:
        report.warn("schema_drift", "Arrays have different lengths", where=path, found=", ".join(f"{a['name']}: {a['shape'][:1]}" for a in arrays[:10]), fix="every array must have one row per sample")
    for array in arrays[:50]:
        values = _head(array, max(sample_rows, 1000))
        column = Column(array["name"], array["dtype"], shape=array["shape"][1:], samples=[] if values is None else sample_values(values, sample_rows))
        if full and values is not None and np.dtype(array["dtype"]).kind == "f":
            whole = _head(array, None)
            column.nulls, column.nulls_exact = int(np.count_nonzero(np.isnan(whole))), True
        report.columns.append(column)
        if values is not None and values.ndim == 1 and index_like(array["name"], values):
            warn_index(report, array["name"], array["file"])


def _head(array: dict, rows: int | None) -> np.ndarray | None:
    """The first rows, memory-mapped for ``.npy`` (reads only those pages)."""
    if np.dtype(array["dtype"]).hasobject:
        return None
    if array["file"].endswith(".npz"):
        with np.load(array["file"]) as archive:
            return archive[array["name"]][:rows]
    data = np.load(array["file"], mmap_mode="r")
    return np.array(data[:rows]) if data.ndim else None
