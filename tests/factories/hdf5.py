"""Contract-test factories for the HDF5 source, written with h5py and pandas/PyTables."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest

from streamfeed.readers import read_hdf5


def hdf5_chunked_gzip(tmp_path: Path):
    """700 rows; x gzip-chunked by 97 rows, id by 61 (uneven): fragments of 97, the last 21."""
    ids = np.arange(700)
    with h5py.File(tmp_path / "chunked.h5", "w") as f:
        f.create_dataset("x", data=ids / 2.0, chunks=(97,), compression="gzip", compression_opts=4)
        f.create_dataset("meta/id", data=ids, chunks=(61,), compression="lzf")
    return read_hdf5(tmp_path / "chunked.h5", columns={"x": "/x", "id": "meta/id"}, rows_per_fragment=100), ids


def hdf5_contiguous_files(tmp_path: Path):
    """Two files of contiguous (unchunked) datasets, 300 and 350 rows, ranges of 130."""
    root = tmp_path / "contig"
    root.mkdir()
    for number, (lo, hi) in enumerate([(0, 300), (300, 650)]):
        ids = np.arange(lo, hi)
        with h5py.File(root / f"part-{number}.h5", "w") as f:
            f["id"] = ids
            f["x"] = ids / 2.0
            f["images"] = np.repeat(ids[:, None, None], 6, axis=1).reshape(-1, 2, 3).astype(np.float32)
    return read_hdf5(root, rows_per_fragment=130), np.arange(650)


def hdf5_pandas_tables(tmp_path: Path):
    """Three pandas ``to_hdf(format="table")`` files (PyTables compound tables)."""
    root = tmp_path / "tables"
    root.mkdir()
    for number, (lo, hi) in enumerate([(0, 170), (170, 400), (400, 520)]):
        ids = np.arange(lo, hi)
        frame = pd.DataFrame({"id": ids, "x": ids / 2.0, "label": ids % 3})
        frame.to_hdf(root / f"part-{number}.h5", key="df", format="table", data_columns=True if number != 1 else None)
    return read_hdf5(root), np.arange(520)


FACTORIES = [
    pytest.param(hdf5_chunked_gzip, id="hdf5-chunked-gzip"),
    pytest.param(hdf5_contiguous_files, id="hdf5-contiguous"),
    pytest.param(hdf5_pandas_tables, id="hdf5-pandas-table"),
]


def hdf5_zero_length(tmp_path: Path):
    with h5py.File(tmp_path / "empty.h5", "w") as f:
        f.create_dataset("id", shape=(0,), dtype=np.int64, chunks=(16,), maxshape=(None,))
        f.create_dataset("x", data=np.zeros(0))
    return read_hdf5(tmp_path / "empty.h5"), np.arange(0)


EMPTY_FACTORIES = [pytest.param(hdf5_zero_length, id="hdf5-zero-length")]
