"""HDF5 reads that reuse work between fragments stay as safe as reads that redo it.

A source checks each dataset for data kept in another file once per file
version (device, inode, size, modification and change time), and each read
thread keeps its last file open for its next read. These tests replace or
rewrite a file between epochs and check that the new file is checked again
and refused as changed since the source opened it (``files/stamps.py``: never
read afresh, which would mix two versions of the data), and that no file
stays open once the reading is over.
"""

from __future__ import annotations

import os
from pathlib import Path

import h5py
import numpy as np
import psutil
import pytest

from streamfeed.errors import CorruptFileError, FileChangedError
from streamfeed.readers import read_hdf5
from streamfeed.sources.hdf5 import guard

ROWS = 256


def _good(path: Path, offset: int = 0) -> Path:
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=np.arange(ROWS, dtype="<i8") + offset, chunks=(32,))
    return path


def _external(path: Path, secret: Path) -> Path:
    """A file whose ``/x`` (same length and dtype) keeps its bytes in ``secret``."""
    secret.write_bytes(np.full(ROWS, 7, dtype="<i8").tobytes())
    with h5py.File(path, "w") as f:
        f.create_dataset("x", shape=(ROWS,), dtype="<i8", external=[(str(secret), 0, ROWS * 8)])
    return path


def _ids(ds, epoch: int) -> list[int]:
    with ds.iter_epoch(epoch) as it:
        return [int(value) for batch in it for value in batch["x"]]


def _open_h5() -> list[str]:
    return [f.path for f in psutil.Process().open_files() if f.path.endswith(".h5")]


@pytest.fixture
def settled_now(monkeypatch):
    """Files written by the test count as settled at once, so the first epoch's check is remembered."""
    monkeypatch.setattr(guard, "_SETTLED_SECONDS", 0.0)


def test_a_file_replaced_by_one_with_external_data_is_refused_at_the_next_read(tmp_path, settled_now):
    path = _good(tmp_path / "data.h5")
    ds = read_hdf5(path, rows_per_fragment=64).batch(32)
    assert _ids(ds, 0) == list(range(ROWS))
    staged = _external(tmp_path / "staged.h5", tmp_path / "secret.bin")
    os.replace(staged, path)  # another inode at the same path
    with pytest.raises(FileChangedError) as caught:
        _ids(ds, 1)
    assert str(path) in str(caught.value)
    assert isinstance(caught.value.__cause__, CorruptFileError)  # the guard refused the outside data first
    assert "keeps its data in another file" in str(caught.value.__cause__)


def test_a_file_rewritten_in_place_with_external_data_is_refused_at_the_next_read(tmp_path, settled_now):
    path = _good(tmp_path / "data.h5")
    ds = read_hdf5(path, rows_per_fragment=64).batch(32)
    assert _ids(ds, 0) == list(range(ROWS))
    inode = path.stat().st_ino
    _external(path, tmp_path / "secret.bin")  # h5py's "w" truncates the same file
    assert path.stat().st_ino == inode
    with pytest.raises(FileChangedError) as caught:
        _ids(ds, 1)
    assert "keeps its data in another file" in str(caught.value.__cause__)


def test_a_replaced_file_is_refused_in_the_next_epoch(tmp_path, settled_now):
    path = _good(tmp_path / "data.h5")
    ds = read_hdf5(path, rows_per_fragment=64).batch(32)
    assert _ids(ds, 0) == list(range(ROWS))
    os.replace(_good(tmp_path / "staged.h5", offset=1000), path)
    with pytest.raises(FileChangedError, match="changed after the dataset opened it"):
        _ids(ds, 1)
    assert _ids(read_hdf5(path, rows_per_fragment=64).batch(32), 0) == list(range(1000, 1000 + ROWS))


@pytest.mark.parametrize("shuffled", [False, True])
def test_files_kept_open_by_read_threads_close_when_the_epoch_ends_or_stops_early(tmp_path, shuffled):
    paths = [_good(tmp_path / f"part{i}.h5", offset=1000 * i) for i in range(3)]
    ds = read_hdf5(paths, rows_per_fragment=32)
    ds = (ds.shuffle(3, window=2) if shuffled else ds).batch(16)
    assert sorted(_ids(ds, 0)) == sorted(v for i in range(3) for v in range(1000 * i, 1000 * i + ROWS))
    assert _open_h5() == []
    with ds.iter_epoch(1) as it:
        next(it)
    assert _open_h5() == []


def test_a_read_outside_streamfeeds_threads_keeps_no_file_open(tmp_path):
    ds = read_hdf5(_good(tmp_path / "data.h5"), rows_per_fragment=64)
    chunk = ds.source.fragments[1].read()
    np.testing.assert_array_equal(chunk["x"], np.arange(64, 128))
    assert _open_h5() == []


def test_a_file_replaced_during_an_epoch_is_refused_by_a_thread_that_kept_it_open(tmp_path, settled_now):
    rows, fragment = 512, 32
    path = tmp_path / "data.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=np.arange(rows, dtype="<i8"), chunks=(fragment,))
    # One read thread: it reads every fragment, keeping the file open between them.
    ds = read_hdf5(path, rows_per_fragment=fragment).with_options(read_threads=1).prefetch(2).batch(fragment)
    staged = tmp_path / "staged.h5"
    with h5py.File(staged, "w") as f:
        f.create_dataset("x", data=np.arange(rows, dtype="<i8") + 10_000, chunks=(fragment,))
    ids: list[int] = []
    with ds.iter_epoch(0) as it, pytest.raises(FileChangedError):
        ids += list(next(it)["x"])
        os.replace(staged, path)
        ids += [value for batch in it for value in batch["x"]]
    # The fragments read before the replace (at most the read-ahead and the queue) are served, none of the new.
    assert ids == list(range(len(ids))) and fragment <= len(ids) < rows
