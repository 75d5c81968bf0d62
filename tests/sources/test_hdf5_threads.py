"""HDF5 reads one fragment at a time by default: h5py serialises its calls.

h5py runs every call under one global lock, so a second read thread only
adds contention (measured on the 2 M-row uncompressed benchmark file, 7
alternations in one process: 1 thread 20.8 M rows/s, 2 threads 15.6 M, the
h5py loop 21.8 M; gzip unchanged). The source says so (``read_parallelism``)
and the layout's default follows it, unless the user chose the threads or
per-fragment ops (which can run in parallel) share the read threads.
"""

from __future__ import annotations

import os
from pathlib import Path

import h5py
import numpy as np

from streamfeed.readers import read_hdf5, read_numpy

ROWS = 1024


def _file(path: Path) -> Path:
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=np.arange(ROWS, dtype="<f4"), chunks=(64,))
    return path


def _default_threads() -> int:
    return min(4, os.cpu_count() or 1)


def test_hdf5_reads_with_one_thread_by_default(tmp_path):
    ds = read_hdf5(_file(tmp_path / "a.h5"), rows_per_fragment=128).batch(100)
    assert ds.source.read_parallelism == 1
    assert ds.layout().read_threads == 1
    with ds.iter_epoch(0) as it:
        assert np.concatenate([b["x"] for b in it]).tolist() == list(range(ROWS))


def test_the_users_threads_and_per_fragment_ops_keep_their_threads(tmp_path):
    path = _file(tmp_path / "a.h5")
    assert read_hdf5(path).with_options(read_threads=3).batch(10).layout().read_threads == 3
    mapped = read_hdf5(path).map(lambda chunk: {"x": chunk["x"] * 2}).batch(10)
    assert mapped.layout().read_threads == _default_threads()


def test_processes_and_other_formats_keep_the_general_default(tmp_path):
    path = _file(tmp_path / "a.h5")
    assert read_hdf5(path, processes=2).layout().read_threads == _default_threads()
    np.save(tmp_path / "x.npy", np.arange(ROWS, dtype="<f4"))
    numpy_ds = read_numpy(tmp_path / "x.npy")
    assert numpy_ds.source.read_parallelism is None
    assert numpy_ds.layout().read_threads == _default_threads()


def test_a_cached_hdf5_source_reads_its_parts_in_parallel(tmp_path):
    ds = read_hdf5(_file(tmp_path / "a.h5"), rows_per_fragment=128).cache(tmp_path / "cache").batch(100)
    assert ds.source.read_parallelism is None
    assert ds.layout().read_threads == _default_threads()
    for epoch in range(2):  # the first epoch writes the parts, the second reads them
        with ds.iter_epoch(epoch) as it:
            assert sorted(np.concatenate([b["x"] for b in it]).tolist()) == list(range(ROWS))
