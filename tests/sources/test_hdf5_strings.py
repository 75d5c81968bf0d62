"""Strings in HDF5 come back as ``str``, as pandas and the Arrow sources (CSV, Parquet) give them.

pandas/PyTables tables store strings as NUL-padded fixed-width bytes: they
are decoded (the table's encoding, UTF-8 by default) into an object array
of ``str``. Plain h5py datasets are decided by what h5py records: a
declared UTF-8 string type becomes ``str``; NumPy bytes (HDF5's default
ASCII character set, which is also what binary blobs get) stay ``bytes``.
Invalid UTF-8 is a data fault naming file, dataset, column and row.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest

from streamfeed.errors import CorruptFileError, SchemaError
from streamfeed.readers import read_hdf5

WORDS = ["a", "héllo", "", "naïve café", "zz", "日本語"]


def read_all(ds) -> dict[str, np.ndarray]:
    with ds.iter_epoch(0) as it:
        chunks = list(it)
    return {name: np.concatenate([c[name] for c in chunks]) for name in chunks[0]} if chunks else {}


def _frame(rows: int = 300) -> pd.DataFrame:
    ids = np.arange(rows)
    return pd.DataFrame(
        {
            "id": ids,
            "x": ids / 2.0,
            "word": [WORDS[i % len(WORDS)] for i in ids],
            "tag": np.where(ids % 2, "odd", "even"),
        }
    )


def _assert_strings(values: np.ndarray, expected: list) -> None:
    assert values.dtype == object
    assert all(type(value) is str for value in values)
    assert values.tolist() == expected


@pytest.mark.parametrize("data_columns", [False, True], ids=["values_blocks", "data_columns"])
def test_pandas_table_strings_read_as_pandas_reads_them(tmp_path, data_columns):
    frame = _frame()
    path = tmp_path / "t.h5"
    frame.to_hdf(path, key="df", format="table", data_columns=data_columns or None)
    theirs = pd.read_hdf(path, "df")
    got = read_all(read_hdf5(path, rows_per_fragment=64))
    for name in ("word", "tag"):
        _assert_strings(got[name], theirs[name].tolist())
    np.testing.assert_array_equal(got["x"], theirs["x"].to_numpy())
    np.testing.assert_array_equal(got["id"], theirs["id"].to_numpy())


def test_pandas_table_in_worker_processes_gives_the_same_strings(tmp_path):
    path = tmp_path / "t.h5"
    _frame().to_hdf(path, key="df", format="table")
    ds = read_hdf5(path, rows_per_fragment=64, processes=2)
    try:
        _assert_strings(read_all(ds)["word"], pd.read_hdf(path, "df")["word"].tolist())
    finally:
        ds.source.close()


def test_files_whose_string_widths_differ_are_one_str_column(tmp_path):
    """pandas sizes each file's string field to its longest value; decoded, the widths no longer matter."""
    short, long = _frame(10), _frame(10)
    short["word"] = "ab"
    long["word"] = "a much longer string"
    short.to_hdf(tmp_path / "a.h5", key="df", format="table")
    long.to_hdf(tmp_path / "b.h5", key="df", format="table")
    ds = read_hdf5([tmp_path / "a.h5", tmp_path / "b.h5"])
    _assert_strings(read_all(ds)["word"], ["ab"] * 10 + ["a much longer string"] * 10)
    assert ds.source.row_bytes >= 20 + 57  # the widest file's bytes and a str object per value


def test_plain_pytables_table_strings_are_str(tmp_path):
    tables = pytest.importorskip("tables")

    class Row(tables.IsDescription):
        name = tables.StringCol(12)
        x = tables.Float32Col()

    with tables.open_file(tmp_path / "p.h5", "w") as handle:
        table = handle.create_table("/", "items", Row)
        for index, word in enumerate(WORDS):
            table.row["name"], table.row["x"] = word.encode(), index
            table.row.append()
        table.flush()
    got = read_all(read_hdf5(tmp_path / "p.h5"))
    _assert_strings(got["name"], WORDS)
    assert pd.read_hdf(tmp_path / "p.h5", "items")["name"].tolist() == WORDS


def test_pandas_fixed_format_strings_are_refused_never_unpickled(tmp_path):
    """``format="fixed"`` keeps string columns as pickled objects: refused, naming the dataset."""
    frame = _frame(5)
    frame.to_hdf(tmp_path / "f.h5", key="df", format="fixed")
    with h5py.File(tmp_path / "f.h5", "r") as handle:
        blocks = {
            name: handle[f"df/{name.replace('items', 'values')}"].dtype
            for name in handle["df"]
            if name.endswith("_items") and handle[f"df/{name}"][0] in (b"word", b"x")
        }
    strings = next(name for name, dtype in blocks.items() if dtype.kind == "O").replace("items", "values")
    numbers = next(name for name, dtype in blocks.items() if dtype.kind != "O").replace("items", "values")
    got = read_all(read_hdf5(tmp_path / "f.h5", columns={"x": f"/df/{numbers}"}))
    np.testing.assert_array_equal(got["x"][:, 0], frame["x"].to_numpy())
    with pytest.raises(SchemaError) as excinfo:
        read_hdf5(tmp_path / "f.h5", columns={"word": f"/df/{strings}"})
    assert "f.h5" in str(excinfo.value) and f"/df/{strings}" in str(excinfo.value)


def test_h5py_datasets_follow_the_declared_encoding(tmp_path):
    utf8 = h5py.string_dtype("utf-8", 16)
    record = np.dtype([("name", utf8), ("raw", "S4"), ("x", "f4")])
    with h5py.File(tmp_path / "h.h5", "w") as handle:
        handle["text"] = np.array([word.encode() for word in WORDS], dtype=utf8)  # declared UTF-8: str
        handle["blob"] = np.array([b"\xff\xd8\x00\x01", b"ab", b"", b"\x00", b"c", b"d"], dtype="S4")  # bytes
        handle["records"] = np.array([(w.encode(), b"r", i) for i, w in enumerate(WORDS)], dtype=record)
    got = read_all(read_hdf5(tmp_path / "h.h5"))
    _assert_strings(got["text"], WORDS)
    assert got["blob"].dtype.kind == "S" and got["blob"].tolist() == [b"\xff\xd8\x00\x01", b"ab", b"", b"", b"c", b"d"]
    _assert_strings(got["name"], WORDS)
    assert got["raw"].dtype.kind == "S" and got["raw"].tolist() == [b"r"] * 6


def _corrupt_pandas_table(path: Path, row: int) -> None:
    """Replaces the ``word`` value of ``row`` by bytes that are not UTF-8, in place."""
    with h5py.File(path, "r+") as handle:
        table = handle["df/table"]
        record = table[row]
        record["word"] = b"\xff\xfebad"
        table[row] = record


def test_invalid_utf8_names_file_dataset_column_and_row(tmp_path):
    path = tmp_path / "bad.h5"
    _frame().to_hdf(path, key="df", format="table", data_columns=["word"])
    _corrupt_pandas_table(path, 123)
    with pytest.raises(CorruptFileError) as excinfo:
        read_all(read_hdf5(path, rows_per_fragment=64))
    text = str(excinfo.value)
    assert str(path) in text and "/df/table" in text and "'word'" in text and "row 123" in text
    assert "UTF-8" in text


def test_invalid_utf8_in_an_h5py_dataset_names_its_row(tmp_path):
    path = tmp_path / "bad.h5"
    values = [b"ok"] * 50
    values[41] = b"\xc3("  # a truncated two-byte sequence
    with h5py.File(path, "w") as handle:
        handle["text"] = np.array(values, dtype=h5py.string_dtype("utf-8", 4))
    with pytest.raises(CorruptFileError) as excinfo:
        read_all(read_hdf5(path, columns={"label": "/text"}))
    text = str(excinfo.value)
    assert str(path) in text and "/text" in text and "'label'" in text and "row 41" in text


def test_invalid_utf8_is_skipped_with_its_rows_under_on_error_skip(tmp_path):
    path = tmp_path / "bad.h5"
    rows = 20_000  # several fragments: PyTables chunks a table of this width in a few thousand rows
    _frame(rows).to_hdf(path, key="df", format="table", data_columns=["word"])
    _corrupt_pandas_table(path, 5_000)
    ds = read_hdf5(path, rows_per_fragment=64, on_error="skip")
    [bad] = [f for f in ds.source.fragments if f.start <= 5_000 < f.stop]
    assert len(ds.source.fragments) > 1
    got = read_all(ds)
    [entry] = ds.report.entries
    assert (entry.path, entry.location, entry.rows) == (str(path), bad.location, bad.num_rows)
    assert "row 5000" in entry.reason
    assert len(got["id"]) == rows - bad.num_rows and 5_000 not in set(got["id"].tolist())
    _assert_strings(got["word"], [WORDS[i % len(WORDS)] for i in got["id"]])
