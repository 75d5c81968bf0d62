"""A local file rewritten with the same size mid-epoch is an error naming it, in every format.

Each test opens a real file written by the format's own writer, reads one
fragment, rewrites the file with other values of the same size (its
modification time moved on, as a rewrite moves it), and reads the next
fragment: a :class:`FileChangedError` naming the file, never the new rows
served next to the old ones, and never skipped under ``on_error="skip"``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import h5py
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

import streamfeed as sf
from streamfeed.errors import CorruptFileError, FileChangedError
from streamfeed.readers import read_csv, read_hdf5, read_images, read_numpy, read_parquet, read_tfrecord
from streamfeed.writers.tfrecord import write_tfrecord

ROWS = 400


def _rewrite(path: Path, write: Callable[[Path], None]) -> None:
    """Rewrites ``path`` in place (same inode) with ``write``'s bytes, which must be of the same size."""
    size, mtime = path.stat().st_size, path.stat().st_mtime_ns
    scratch = path.with_name("scratch-" + path.name)
    write(scratch)
    data = scratch.read_bytes()
    scratch.unlink()
    assert len(data) == size and data != path.read_bytes()
    with open(path, "r+b") as handle:
        handle.write(data)
    os.utime(path, ns=(mtime, mtime + 2 * 10**9))  # a rewrite's new time (the clock may not tick between writes)


def _check(ds: sf.Dataset, path: Path, write: Callable[[Path], None]) -> None:
    fragments = ds.source.fragments
    assert len(fragments) >= 2
    fragments[0].read()
    _rewrite(path, write)
    with pytest.raises(FileChangedError) as excinfo:
        fragments[1].read()
    assert str(path) in str(excinfo.value)
    assert not isinstance(excinfo.value, CorruptFileError)


def _parquet(offset: int) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        ids = np.arange(ROWS, dtype=np.int64) + offset
        pq.write_table(pa.table({"id": ids}), path, row_group_size=ROWS // 4, use_dictionary=False, compression="none")

    return write


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_parquet(tmp_path, on_error):
    path = tmp_path / "data.parquet"
    _parquet(0)(path)
    _check(read_parquet(path, on_error=on_error), path, _parquet(10_000))


def test_parquet_between_epochs_is_refused_not_skipped(tmp_path):
    path = tmp_path / "data.parquet"
    _parquet(0)(path)
    ds = read_parquet(path, on_error="skip").batch(50)
    assert sum(len(batch["id"]) for batch in ds) == ROWS
    _rewrite(path, _parquet(10_000))
    with pytest.raises(FileChangedError):
        sum(len(batch["id"]) for batch in ds)


def _csv(offset: int) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        path.write_text("id\n" + "".join(f"{i + offset:06d}\n" for i in range(ROWS)))

    return write


def test_csv(tmp_path):
    path = tmp_path / "data.csv"
    _csv(0)(path)
    _check(read_csv(path, fragment_bytes=512, count_cache=False), path, _csv(500_000))


def _hdf5(offset: int) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        with h5py.File(path, "w") as handle:
            handle.create_dataset("x", data=np.arange(ROWS, dtype=np.int64) + offset)

    return write


def test_hdf5(tmp_path):
    path = tmp_path / "data.h5"
    _hdf5(0)(path)
    _check(read_hdf5(path, columns={"x": "/x"}, rows_per_fragment=ROWS // 4), path, _hdf5(10_000))


def _npy(offset: int) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        with open(path, "wb") as handle:
            np.save(handle, np.arange(ROWS, dtype=np.int64) + offset)

    return write


def test_numpy(tmp_path):
    path = tmp_path / "x.npy"
    _npy(0)(path)
    _check(read_numpy(str(path), rows_per_fragment=ROWS // 4), path, _npy(10_000))


def _tfrecord(offset: int) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        out = path.with_name(path.name + ".dir")
        ids = np.arange(ROWS, dtype=np.int64) + offset
        (shard,) = write_tfrecord({"id": ids}, out / "part", shard_rows=ROWS)
        os.replace(shard, path)
        for rest in out.iterdir():
            rest.unlink()
        out.rmdir()

    return write


def test_tfrecord(tmp_path):
    path = tmp_path / "data.tfrecord"
    _tfrecord(20_000)(path)  # ids of three varint bytes either way: the same size
    _check(read_tfrecord(path, features={"id": ("int64", ())}, fragment_bytes=2048), path, _tfrecord(30_000))


def _bmp(value: int) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        Image.new("L", (4, 4), value).save(path, "BMP")  # uncompressed: the same size whatever the pixels

    return write


def test_images(tmp_path):
    root = tmp_path / "root"
    (root / "c").mkdir(parents=True)
    for number in range(4):
        _bmp(10)(root / "c" / f"{number}.bmp")
    ds = read_images(root, size=(4, 4), fragment_size=2)
    _check(ds, root / "c" / "3.bmp", _bmp(200))
