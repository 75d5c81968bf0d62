"""The HDF5 source on files written by h5py and pandas/PyTables, and damaged copies.

Every error test checks that the message names the file (and the dataset or
rows where there is one).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import psutil
import pytest

from streamfeed.errors import CorruptFileError, SchemaError
from streamfeed.readers import read_hdf5
from streamfeed.sources.hdf5.catalog import pickled_names


def read_all(ds) -> dict[str, np.ndarray]:
    with ds.iter_epoch(0) as it:
        chunks = list(it)
    return {name: np.concatenate([c[name] for c in chunks]) for name in chunks[0]} if chunks else {}


def write(path: Path, rows: int = 500, **options) -> Path:
    ids = np.arange(rows)
    with h5py.File(path, "w") as f:
        f.create_dataset(
            "images", data=np.arange(rows * 6, dtype=np.float32).reshape(rows, 2, 3), chunks=(64, 2, 3), **options
        )
        f.create_dataset("meta/labels", data=ids % 7, chunks=(64,), **options)
        f.create_dataset("id", data=ids, chunks=(64,), **options)
    return path


@pytest.mark.parametrize("compression", ["gzip", "lzf", "szip", None])
def test_compressed_multidim_nested_reads_back_in_chunk_aligned_fragments(tmp_path, compression):
    if compression == "szip" and not h5py.h5z.filter_avail(h5py.h5z.FILTER_SZIP):
        pytest.skip("this h5py build has no szip filter (h5py.h5z.filter_avail(FILTER_SZIP) is False)")
    path = write(tmp_path / "data.h5", compression=compression)
    ds = read_hdf5(path, columns={"x": "/images", "y": "meta/labels", "id": "/id"}, rows_per_fragment=150)
    starts = [f.start for f in ds.source.fragments]
    assert starts == [0, 128, 256, 384] and sum(f.num_rows for f in ds.source.fragments) == 500
    got = read_all(ds)
    np.testing.assert_array_equal(got["x"], np.arange(3000, dtype=np.float32).reshape(500, 2, 3))
    np.testing.assert_array_equal(got["y"], np.arange(500) % 7)
    assert got["x"].shape == (500, 2, 3) and got["x"].dtype == np.float32


def test_discovered_columns_and_contiguous_ranges(tmp_path):
    with h5py.File(tmp_path / "c.h5", "w") as f:
        f["a"] = np.arange(1000, dtype=np.float64)
        f["g/b"] = np.arange(1000)
    ds = read_hdf5(tmp_path / "c.h5", rows_per_fragment=300)
    assert ds.source.column_names == ["a", "g/b"]
    assert [f.num_rows for f in ds.source.fragments] == [300, 300, 300, 100]
    assert len(read_hdf5(tmp_path / "c.h5").source.fragments) == 1  # default: ~8 MiB ranges


def test_different_lengths_raise_naming_both_datasets_and_lengths(tmp_path):
    with h5py.File(tmp_path / "bad.h5", "w") as f:
        f["x"] = np.zeros(100)
        f["y"] = np.zeros(99)
    with pytest.raises(SchemaError) as excinfo:
        read_hdf5(tmp_path / "bad.h5", columns={"x": "x", "y": "y"})
    text = str(excinfo.value)
    assert "bad.h5" in text and "/x has 100 rows" in text and "/y has 99 rows" in text


def test_missing_dataset_lists_available_ones(tmp_path):
    path = write(tmp_path / "data.h5")
    with pytest.raises(SchemaError) as excinfo:
        read_hdf5(path, columns={"x": "/imagez"})
    text = str(excinfo.value)
    assert "data.h5" in text and "/imagez" in text
    assert "/images float32[500, 2, 3]" in text and "/meta/labels" in text and "/id" in text


def damaged_dir(tmp_path: Path) -> Path:
    root = tmp_path / "damaged"
    root.mkdir()
    write(root / "a-good.h5", rows=300)
    (root / "b-zero.h5").write_bytes(b"")
    (root / "c-text.h5").write_text("id,x\n1,2\n")
    whole = (root / "a-good.h5").read_bytes()
    (root / "d-truncated.h5").write_bytes(whole[: len(whole) // 2])
    return root


@pytest.mark.parametrize("name", ["b-zero.h5", "c-text.h5", "d-truncated.h5"])
def test_damaged_files_raise_naming_the_file(tmp_path, name):
    root = damaged_dir(tmp_path)
    with pytest.raises(CorruptFileError) as excinfo:
        read_hdf5(root / name)
    assert str(root / name) in str(excinfo.value) and "not readable HDF5" in str(excinfo.value)


def test_skip_reports_each_damaged_file_exactly(tmp_path):
    root = damaged_dir(tmp_path)
    ds = read_hdf5(root, on_error="skip")
    assert [(e.path, e.location, e.rows) for e in ds.report.entries] == [
        (str(root / name), "file", None) for name in ("b-zero.h5", "c-text.h5", "d-truncated.h5")
    ]
    assert len(read_all(ds)["id"]) == 300 == ds.report.total_rows


def test_corrupt_chunk_skips_its_fragment_and_counts_add_up(tmp_path):
    path = write(tmp_path / "data.h5", compression="gzip")
    with h5py.File(path, "r") as f:
        info = f["images"].id.get_chunk_info(2)  # rows 128-191
    with open(path, "r+b") as handle:
        handle.seek(info.byte_offset)
        handle.write(b"\xff" * info.size)
    with pytest.raises(CorruptFileError) as excinfo:
        read_all(read_hdf5(path, rows_per_fragment=64))
    assert str(path) in str(excinfo.value) and "rows 128-191" in str(excinfo.value)
    ds = read_hdf5(path, rows_per_fragment=64, on_error="skip")
    got = read_all(ds)
    assert [(e.path, e.rows) for e in ds.report.entries] == [(str(path), 64)]
    assert ds.report.entries[0].location == "rows 128-191"
    assert len(got["id"]) + ds.report.skipped_rows == ds.report.total_rows == 500
    assert 150 not in set(got["id"]) and 200 in set(got["id"])


def test_pandas_tables_fields_become_columns(tmp_path):
    ids = np.arange(300)
    frame = pd.DataFrame({"id": ids, "x": ids / 2.0, "label": ids % 3, "tag": np.where(ids % 2, "odd", "even")})
    frame.to_hdf(tmp_path / "blocks.h5", key="df", format="table")  # values_block_N fields
    frame.to_hdf(tmp_path / "named.h5", key="df", format="table", data_columns=True)
    for name in ("blocks.h5", "named.h5"):
        ds = read_hdf5(tmp_path / name)
        assert sorted(ds.source.column_names) == ["id", "label", "tag", "x"], name  # pandas index left out
        got = read_all(ds)
        np.testing.assert_array_equal(got["id"], ids)
        np.testing.assert_array_equal(got["x"], ids / 2.0)
        np.testing.assert_array_equal(got["label"], ids % 3)
        assert list(got["tag"][:2]) == ["even", "odd"]  # str, as pandas reads them
    explicit = read_all(read_hdf5(tmp_path / "named.h5", columns={"x": "/df/table/x", "index": "/df/table/index"}))
    np.testing.assert_array_equal(explicit["index"], ids)


def test_pytables_column_names_are_never_unpickled():
    assert pickled_names(b"(lp0\nVid\np1\naVx y\np2\na.") == ["id", "x y"]
    assert pickled_names(b"cos\nsystem\n(S'echo pwned'\ntR.") is None  # a GLOBAL/REDUCE: refused


def test_no_file_handles_left_open(tmp_path):
    path = write(tmp_path / "data.h5", compression="gzip")
    ds = read_hdf5(path, rows_per_fragment=64).shuffle(1, window=2).batch(50)
    for _ in range(2):
        with ds.iter_epoch(0) as it:
            sum(len(b["id"]) for b in it)
    assert [f.path for f in psutil.Process().open_files() if f.path.endswith(".h5")] == []


def test_worker_processes_read_the_same_rows(tmp_path):
    path = write(tmp_path / "data.h5", compression="gzip")
    ds = read_hdf5(path, rows_per_fragment=64, processes=2)
    try:
        got, want = read_all(ds), read_all(read_hdf5(path, rows_per_fragment=64))
        for name in want:
            np.testing.assert_array_equal(got[name], want[name])
    finally:
        ds.source.close()
    assert [f.path for f in psutil.Process().open_files() if f.path.endswith(".h5")] == []


def test_files_with_different_dtypes_are_refused(tmp_path):
    write(tmp_path / "a.h5", rows=100)
    shutil.copy(tmp_path / "a.h5", tmp_path / "b.h5")
    with h5py.File(tmp_path / "b.h5", "a") as f:
        del f["id"]
        f["id"] = np.arange(100, dtype=np.int32)
    with pytest.raises(SchemaError) as excinfo:
        read_hdf5([tmp_path / "a.h5", tmp_path / "b.h5"])
    assert "b.h5" in str(excinfo.value) and "'id'" in str(excinfo.value)
