"""HDF5 variable-length datasets of numbers (``h5py.vlen_dtype``) read as ragged rows.

Files are written by h5py and the truth is h5py's own read of the same
dataset. Lengths 0 to 40, chunked and compressed, two files, several
fragments per file; the worker-process path reads the same rows.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

import streamfeed as sf
from streamfeed.core_ragged import Ragged
from streamfeed.errors import SchemaError


def _write(path: Path, first: int, rows: int, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as f:
        tok = f.create_dataset("tok", (rows,), dtype=h5py.vlen_dtype(np.int32), chunks=(50,), compression="gzip")
        w = f.create_dataset("w", (rows,), dtype=h5py.vlen_dtype(np.float64), chunks=(37,))
        for index in range(rows):
            length = 0 if index % 9 == 0 else int(rng.integers(1, 41))
            tok[index] = rng.integers(-(2**31), 2**31 - 1, size=length, dtype=np.int32)
            w[index] = rng.normal(size=index % 4)
        f["y"] = np.arange(first, first + rows)
    return path


def _h5py_rows(paths: list[Path]) -> dict[int, dict[str, list]]:
    rows = {}
    for path in paths:
        with h5py.File(path, "r") as f:
            for y, tok, w in zip(f["y"][:].tolist(), f["tok"][:], f["w"][:]):
                rows[y] = {"tok": tok.tolist(), "w": w.tolist()}
    return rows


def _served(dataset) -> dict[int, dict[str, list]]:
    rows = {}
    for chunk in dataset.iter_epoch():
        assert list(chunk) == ["tok", "w", "y"]
        assert isinstance(chunk["tok"], Ragged) and isinstance(chunk["w"], Ragged)
        assert chunk["tok"].dtype == np.int32 and chunk["w"].dtype == np.float64
        for index, y in enumerate(chunk["y"].tolist()):
            assert y not in rows
            rows[y] = {"tok": chunk["tok"].row(index).tolist(), "w": chunk["w"].row(index).tolist()}
    return rows


@pytest.fixture()
def files(tmp_path) -> list[Path]:
    return [_write(tmp_path / "a.h5", 0, 400, 1), _write(tmp_path / "b.h5", 400, 230, 2)]


def test_variable_length_datasets_equal_h5pys_own_read(files):
    dataset = sf.read_hdf5(files, rows_per_fragment=100)
    assert len(dataset.source.fragments) > 4
    assert _served(dataset) == _h5py_rows(files)


def test_worker_processes_serve_the_same_rows(files):
    dataset = sf.read_hdf5(files, rows_per_fragment=150, processes=1)
    try:
        assert _served(dataset) == _h5py_rows(files)
        only_lists = sf.read_hdf5(files, columns={"tok": "/tok"}, rows_per_fragment=150, processes=1)
        served = [row for chunk in only_lists.iter_epoch() for row in chunk["tok"].to_list()]
        only_lists.source.close()
        assert served == [row["tok"] for _, row in sorted(_h5py_rows(files).items())]
    finally:
        dataset.source.close()


def test_shuffled_padded_batches_hold_every_row_once(files):
    truth = _h5py_rows(files)
    dataset = sf.read_hdf5(files, rows_per_fragment=100).shuffle(seed=5)
    seen = []
    for batch in dataset.batch(32, pad=sf.Pad(columns=["tok", "w"], mark="length")).iter_epoch():
        for y, row, length in zip(batch["y"].tolist(), batch["tok"], batch["tok_length"].tolist()):
            assert row[:length].tolist() == truth[y]["tok"] and not row[length:].any()
            seen.append(y)
    assert sorted(seen) == sorted(truth)


def test_fragments_are_sized_from_the_first_chunks_mean_length(tmp_path):
    path = tmp_path / "long.h5"
    with h5py.File(path, "w") as f:
        tok = f.create_dataset("tok", (3000,), dtype=h5py.vlen_dtype(np.float64), chunks=(100,))
        for index in range(3000):
            tok[index] = np.arange(2000 if index < 100 else 1, dtype=np.float64)
        first = [len(row) for row in f["tok"][:100]]
    source = sf.read_hdf5(path).source
    column = source.fragments[0]._columns[0]
    assert column.mean_length == sum(first) / 100
    assert column.row_bytes == 8 * 2000 + 8
    # 8 MiB fragments of ~16 KB rows: about 500 rows, a multiple of the 100-row chunks
    assert [f.num_rows for f in source.fragments[:2]] == [500, 500]


def test_variable_length_strings_and_compound_fields_are_still_refused(tmp_path):
    path = tmp_path / "s.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("name", data=np.array(["a", "bb"], dtype=object), dtype=h5py.string_dtype())
        f["y"] = np.arange(2)
    with pytest.raises(SchemaError, match=r"'name' \(/name\) has dtype object.*variable-length dataset of numbers"):
        sf.read_hdf5(path, columns={"name": "/name"})
    path = tmp_path / "c.h5"
    kind = np.dtype([("tok", h5py.vlen_dtype(np.int32)), ("y", np.int64)])
    with h5py.File(path, "w") as f:
        table = f.create_dataset("t", (2,), dtype=kind)
        table[0] = (np.arange(3, dtype=np.int32), 7)
    with pytest.raises(SchemaError, match=r"'tok' \(/t field 'tok'\) has dtype object"):
        sf.read_hdf5(path, columns={"tok": "/t/tok"})
