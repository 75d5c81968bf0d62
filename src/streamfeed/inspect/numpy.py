"""Inspecting ``.npy``/``.npz``: headers only (dtype, shape, order, compression), plus a few rows."""

from __future__ import annotations

import os
import zipfile

import numpy as np

from ..errors import CorruptFileError, SchemaError
from ..sources._paths import resolve_files
from ..sources.numpy import npy_header
from .report import Column, InspectReport, add_files, index_like, sample_values, warn_index


def inspect_numpy(path: str, *, full: bool, sample_rows: int, memory_limit: int | None, report: InspectReport) -> None:
    files = list(resolve_files(path, suffixes=(".npy", ".npz")).files)
    add_files(report, files, [os.path.getsize(file) for file in files])
    arrays, unreadable = [], []
    for file in files:
        try:
            arrays += _arrays(file)
        except (CorruptFileError, SchemaError) as exc:  # what the source would refuse, e.g. object arrays
            unreadable.append((file, str(exc)))
    if unreadable:
        report.warn(
            "unreadable_files",
            f"{len(unreadable)} NumPy file(s) cannot be streamed",
            where=unreadable[0][0],
            found=unreadable[0][1][:300],
            fix="rewrite them with numpy.save / numpy.savez, with a fixed-size dtype",
        )
    report.details["arrays"] = arrays[:100]
    lengths = {array["shape"][0] for array in arrays if array["shape"]}
    report.rows = lengths.pop() if len(lengths) == 1 else None
    report.rows_exact = report.rows is not None
    if len(lengths) > 0:
        report.warn(
            "schema_drift",
            "Arrays have different lengths",
            where=path,
            found=", ".join(f"{a['name']}: {a['shape'][:1]}" for a in arrays[:10]),
            fix="every array must have one row per sample",
        )
    for array in arrays[:50]:
        values = _head(array, max(sample_rows, 1000))
        samples = sample_values(values, sample_rows)
        column = Column(array["name"], array["dtype"], shape=array["shape"][1:], samples=samples)
        if full and np.dtype(array["dtype"]).kind == "f":
            whole = _head(array, None)
            column.nulls, column.nulls_exact = int(np.count_nonzero(np.isnan(whole))), True
        report.columns.append(column)
        if values.ndim == 1 and index_like(array["name"], values):
            warn_index(report, array["name"], array["file"])


def _arrays(file: str) -> list[dict]:
    """Each array's facts from its header, read as the source reads it (never unpickles, refuses object arrays)."""
    if not file.endswith(".npz"):
        with open(file, "rb") as handle:
            header = npy_header(handle, file)
        return [_facts(file, os.path.basename(file), header, compressed=False)]
    arrays = []
    with zipfile.ZipFile(file) as archive:
        for info in archive.infolist():
            with archive.open(info) as member:
                header = npy_header(member, f"{file}:{info.filename}")
            arrays.append(_facts(file, info.filename, header, compressed=info.compress_type != zipfile.ZIP_STORED))
    return arrays


def _facts(file: str, name: str, header: tuple[np.dtype, tuple[int, ...], bool], *, compressed: bool) -> dict:
    dtype, shape, fortran = header
    return {
        "file": file, "name": name.removesuffix(".npy"), "dtype": str(dtype), "shape": list(shape),
        "fortran_order": fortran, "compressed": compressed,
    }  # fmt: skip


def _head(array: dict, rows: int | None) -> np.ndarray:
    """The first rows, memory-mapped for ``.npy`` (reads only those pages)."""
    if array["file"].endswith(".npz"):
        with np.load(array["file"]) as archive:
            return archive[array["name"]][:rows]
    return np.array(np.load(array["file"], mmap_mode="r")[:rows])
