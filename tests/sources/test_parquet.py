"""Edge cases of the Parquet source, on files written by pyarrow, pandas and polars.

Every error test checks that the message names the file (and the column and
row where there is one): an error that does not say where is half an error.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

import streamfeed as sf
from streamfeed.errors import CorruptFileError, DataError, ErrorBudgetExceeded, SchemaError

HIVE_CITIES = ("paris", "new york", "são paulo", "a/b")  # as in conftest.hive_dir


def read_all(ds: sf.Dataset, batch_size: int = 64) -> dict[str, np.ndarray]:
    """Every row of epoch 0, columns concatenated."""
    with ds.batch(batch_size).iter_epoch(0) as it:
        batches = list(it)
    assert batches, "no rows came out"
    return {name: np.concatenate([b[name] for b in batches]) for name in batches[0]}


def count_rows(ds: sf.Dataset) -> int:
    with ds.iter_epoch(0) as it:
        return sum(len(chunk["id"]) for chunk in it)


def message(excinfo: pytest.ExceptionInfo) -> str:
    return str(excinfo.value)


# --------------------------------------------------------------------- writers
@pytest.mark.parametrize("fixture", ["pyarrow_file", "pandas_file", "polars_file"])
def test_each_writer_reads_back_exactly(fixture, request, expected_columns):
    path = request.getfixturevalue(fixture)
    ds = sf.read_parquet(path)
    assert ds.source.column_names == ["id", "x", "label", "name"]
    assert len(ds.source.fragments) == 7  # 600 rows in row groups of 97
    got = read_all(ds)
    want = expected_columns(np.arange(600))
    for name, column in want.items():
        np.testing.assert_array_equal(got[name], column, err_msg=name)
    assert got["id"].dtype == np.int64 and got["x"].dtype == np.float64 and got["label"].dtype == np.int64


def test_directory_of_files_by_every_writer(mixed_dir, expected_columns):
    ds = sf.read_parquet(mixed_dir)
    assert len(ds) == 1800
    got = read_all(ds.shuffle(3, window=4))
    order = np.argsort(got["id"])
    for name, column in expected_columns(np.arange(1800)).items():
        np.testing.assert_array_equal(got[name][order], column, err_msg=name)


# ---------------------------------------------------------------- hive / paths
def test_hive_partitions_are_typed_with_their_real_values(hive_dir):
    ds = sf.read_parquet(hive_dir)
    assert ds.source.schema.field("year").type == pa.int64()
    assert ds.source.schema.field("city").type == pa.string()
    got = read_all(ds)
    assert got["year"].dtype == np.int64  # typed values, not strings and not dictionary codes
    np.testing.assert_array_equal(np.sort(got["id"]), np.arange(600))
    np.testing.assert_array_equal(got["year"], 2020 + got["id"] % 3)
    # The writer URI-encodes "new york" as new%20york: the reader must decode it.
    assert list(got["city"]) == [HIVE_CITIES[i % 4] for i in got["id"]]


def test_hive_partition_columns_can_be_projected_and_filtered(hive_dir):
    ds = sf.read_parquet(
        hive_dir, columns=["id", "city"], filter=(pads.field("year") == 2021) & (pads.field("city") == "new york")
    )
    want = [i for i in range(600) if i % 3 == 1 and i % 4 == 1]
    assert len(ds) == len(want)
    got = read_all(ds)
    assert sorted(got) == ["city", "id"]
    assert sorted(got["id"]) == want
    assert set(got["city"]) == {"new york"}


def test_hive_null_partition_meets_the_null_policy(tmp_path):
    ids = np.arange(60)
    group = pa.array([None if i % 3 == 0 else int(i % 3) for i in ids], pa.int64())
    pads.write_dataset(
        pa.table({"id": ids, "g": group}),
        tmp_path / "h",
        format="parquet",
        partitioning=["g"],
        partitioning_flavor="hive",
    )
    null_dir = tmp_path / "h" / "g=__HIVE_DEFAULT_PARTITION__"
    assert null_dir.is_dir()
    with pytest.raises(DataError) as excinfo:
        read_all(sf.read_parquet(tmp_path / "h"))
    assert "'g'" in message(excinfo) and str(null_dir) in message(excinfo)
    got = read_all(sf.read_parquet(tmp_path / "h", nulls="fill", fill=-1))
    assert got["g"].dtype == np.int64
    np.testing.assert_array_equal(got["g"], np.where(got["id"] % 3 == 0, -1, got["id"] % 3))
    assert len(sf.read_parquet(tmp_path / "h", nulls="drop")) == 40


def test_column_projection(writer, tmp_path):
    path = writer(tmp_path / "data.parquet", np.arange(300))
    ds = sf.read_parquet(path, columns=["name", "id"])
    assert ds.source.column_names == ["name", "id"]
    got = read_all(ds)
    assert sorted(got) == ["id", "name"]
    np.testing.assert_array_equal(got["id"], np.arange(300))
    with pytest.raises(SchemaError) as excinfo:
        sf.read_parquet(path, columns=["id", "nope"])
    assert "nope" in message(excinfo) and str(tmp_path) in message(excinfo)


def test_filter_pushdown_gives_exact_len(writer, tmp_path):
    path = writer(tmp_path / "data.parquet", np.arange(600))
    ds = sf.read_parquet(path, filter=pads.field("x") > 3)  # x = id / 2: ids 7..599
    assert len(ds) == ds.num_rows() == 593
    assert len(ds.batch(50)) == 12 == len(list(ds.batch(50).iter_epoch(0)))
    np.testing.assert_array_equal(read_all(ds)["id"], np.arange(7, 600))
    late = sf.read_parquet(path, filter=pads.field("id") >= 500)
    assert len(late) == 100
    assert len(late.source.fragments) == 2  # row groups 0-4 are skipped by their statistics
    np.testing.assert_array_equal(read_all(late)["id"], np.arange(500, 600))


@pytest.mark.parametrize("parts", [("my data", "ünïcødé 数据", "part 1 é.parquet"), ("run [1]", "x", "a b.parquet")])
def test_paths_with_spaces_brackets_and_non_ascii(tmp_path, parts):
    directory = tmp_path.joinpath(*parts[:-1])
    directory.mkdir(parents=True)
    pq.write_table(pa.table({"id": np.arange(100)}), directory / parts[-1], row_group_size=30)
    pq.write_table(pa.table({"id": np.arange(100, 150)}), directory / "second ü.parquet")
    for spec in (directory / parts[-1], str(directory / parts[-1]), [directory / parts[-1]]):
        np.testing.assert_array_equal(read_all(sf.read_parquet(spec))["id"], np.arange(100))
    for spec in (directory, tmp_path / parts[0], [directory / parts[-1], directory / "second ü.parquet"]):
        np.testing.assert_array_equal(np.sort(read_all(sf.read_parquet(spec))["id"]), np.arange(150))


def test_glob_with_non_ascii_directory(tmp_path):
    directory = tmp_path / "données 2024"
    directory.mkdir()
    for number in range(3):
        pq.write_table(pa.table({"id": np.arange(number * 10, number * 10 + 10)}), directory / f"p-{number}.parquet")
    pq.write_table(pa.table({"id": np.arange(900, 905)}), directory / "skip.parquet")
    ds = sf.read_parquet(str(directory / "p-*.parquet"))
    np.testing.assert_array_equal(np.sort(read_all(ds)["id"]), np.arange(30))


def test_missing_path_and_empty_glob_raise_naming_them(tmp_path):
    with pytest.raises(FileNotFoundError) as excinfo:
        sf.read_parquet(tmp_path / "absent.parquet")
    assert "absent.parquet" in message(excinfo)
    # A glob that matches nothing is a typo, not an empty dataset to train on silently.
    with pytest.raises(FileNotFoundError) as excinfo:
        sf.read_parquet(str(tmp_path / "nothing-*.parquet"))
    assert "nothing-*.parquet" in message(excinfo)


# ------------------------------------------------------------------ schema drift
def test_int32_and_int64_files_unify_to_int64_without_loss(tmp_path):
    root = tmp_path / "drift"
    root.mkdir()
    pq.write_table(
        pa.table({"id": pa.array(np.arange(50), pa.int64()), "v": pa.array(np.arange(50) - 2**31, pa.int32())}),
        root / "a.parquet",
    )
    big = 2**40 + np.arange(50, 100)
    pd.DataFrame({"id": np.arange(50, 100), "v": big}).to_parquet(root / "b.parquet", index=False)
    ds = sf.read_parquet(root)
    assert ds.source.schema.field("v").type == pa.int64()
    got = read_all(ds)
    assert got["v"].dtype == np.int64
    np.testing.assert_array_equal(got["v"], np.concatenate([np.arange(50) - 2**31, big]))


def test_column_missing_from_one_file_raises_naming_column_and_that_file(tmp_path):
    root = tmp_path / "drift"
    root.mkdir()
    pq.write_table(pa.table({"id": np.arange(40), "extra": np.arange(40) * 1.5}), root / "a-has.parquet")
    pl.DataFrame({"id": np.arange(40, 80)}).write_parquet(root / "b-lacks.parquet")
    ds = sf.read_parquet(root)
    with pytest.raises(DataError) as excinfo:
        read_all(ds)
    text = message(excinfo)
    assert "'extra'" in text and str(root / "b-lacks.parquet") in text
    assert "no such column" in text
    # Filling is the documented way out; the column keeps its type.
    got = read_all(sf.read_parquet(root, nulls="fill", fill={"extra": -1.0}))
    np.testing.assert_array_equal(got["extra"], np.where(got["id"] < 40, got["id"] * 1.5, -1.0))


@pytest.mark.parametrize(
    "first, second",
    [
        (pa.array(["a", "b"]), pa.array([1, 2], pa.int64())),
        (pa.array([1, 2], pa.int64()), pa.array([0.5, 1.5], pa.float64())),
        (pa.array([0.5, 1.5], pa.float64()), pa.array([1, 2], pa.int64())),
    ],
    ids=["string-int64", "int64-float64", "float64-int64"],
)
def test_incompatible_types_raise_schema_error_naming_column_and_both_files(tmp_path, first, second):
    root = tmp_path / "drift"
    root.mkdir()
    pq.write_table(pa.table({"id": [0, 1], "v": first}), root / "one.parquet")
    pq.write_table(pa.table({"id": [2, 3], "v": second}), root / "two.parquet")
    with pytest.raises(SchemaError) as excinfo:
        sf.read_parquet(root)
    text = message(excinfo)
    assert "'v'" in text
    assert str(root / "one.parquet") in text and str(root / "two.parquet") in text


# -------------------------------------------------------------------- null / NaN
def write_with_gaps(tmp_path: Path) -> tuple[Path, set[int]]:
    """600 rows (row groups of 97) with nulls in int ``n`` and float ``x`` and NaN in ``x``."""
    ids = np.arange(600)
    null_n, null_x, nan_x = {300, 301, 599}, {5, 450}, {123, 301}
    n = pa.array([None if i in null_n else int(i) for i in ids], pa.int64())
    x = pa.array([None if i in null_x else (np.nan if i in nan_x else i / 2) for i in ids], pa.float64())
    path = tmp_path / "gaps.parquet"
    pq.write_table(pa.table({"id": ids, "n": n, "x": x}), path, row_group_size=97)
    return path, null_n | null_x | nan_x


def test_null_raises_naming_column_file_and_row(tmp_path):
    path, _ = write_with_gaps(tmp_path)
    with pytest.raises(DataError) as excinfo:
        read_all(sf.read_parquet(path, columns=["id", "n"]))
    text = message(excinfo)
    assert "'n'" in text and str(path) in text and "row 300 " in text and "row group 3" in text


def test_null_row_is_the_files_row_when_a_filter_removed_rows_before_it(tmp_path):
    path, _ = write_with_gaps(tmp_path)
    ds = sf.read_parquet(path, columns=["id", "n"], filter=pads.field("id") >= 295)  # row group 3 starts at 291
    assert len(ds) == 305
    with pytest.raises(DataError) as excinfo:
        read_all(ds)
    text = message(excinfo)
    assert "'n'" in text and str(path) in text and "row 300 " in text and "row group 3" in text


@pytest.mark.parametrize(
    "library, kind",
    # pandas writes a float NaN as null, so it has no NaN case of its own.
    [("pyarrow", "null"), ("pyarrow", "nan"), ("pandas", "null"), ("polars", "null"), ("polars", "nan")],
)
def test_null_or_nan_in_a_float_column_raises_naming_the_row(tmp_path, library, kind):
    ids = np.arange(400)
    values = [float(i) / 2 for i in ids]
    values[250] = None if kind == "null" else float("nan")
    path = tmp_path / "gap.parquet"
    if library == "pyarrow":
        pq.write_table(pa.table({"id": ids, "x": pa.array(values, pa.float64())}), path, row_group_size=97)
    elif library == "pandas":
        pd.DataFrame({"id": ids, "x": pd.array(values, dtype="Float64")}).to_parquet(
            path, index=False, row_group_size=97
        )
    else:
        pl.DataFrame({"id": ids, "x": pl.Series(values, dtype=pl.Float64)}).write_parquet(path, row_group_size=97)
    assert pq.read_table(path)["x"].null_count == (kind == "null")  # the writer wrote what we meant
    with pytest.raises(DataError) as excinfo:
        read_all(sf.read_parquet(path))
    text = message(excinfo)
    assert "'x'" in text and str(path) in text and "row 250 " in text and "row group 2" in text


def test_drop_removes_exactly_the_bad_rows_and_len_is_exact(tmp_path):
    path, bad = write_with_gaps(tmp_path)
    ds = sf.read_parquet(path, nulls="drop")
    want = np.array(sorted(set(range(600)) - bad))
    assert len(ds) == ds.num_rows() == len(want) == 594
    batched = ds.shuffle(2, window=3).batch(50, last_batch="drop")
    assert len(batched) == len(list(batched.iter_epoch(0))) == 11
    got = read_all(ds)
    np.testing.assert_array_equal(got["id"], want)
    np.testing.assert_array_equal(got["n"], want)
    np.testing.assert_array_equal(got["x"], want / 2)
    assert got["n"].dtype == np.int64
    # Dropping only looks at the columns read.
    assert len(sf.read_parquet(path, columns=["id", "n"], nulls="drop")) == 597


def test_fill_with_one_value_keeps_int_columns_integer(tmp_path):
    path, _ = write_with_gaps(tmp_path)
    got = read_all(sf.read_parquet(path, nulls="fill", fill=-1))
    assert got["n"].dtype == np.int64 and got["x"].dtype == np.float64
    np.testing.assert_array_equal(got["n"][[300, 301, 599, 0, 7]], [-1, -1, -1, 0, 7])
    np.testing.assert_array_equal(got["x"][[5, 450, 123, 301, 8]], [-1.0, -1.0, -1.0, -1.0, 4.0])
    assert not np.isnan(got["x"]).any()


def test_fill_with_a_value_per_column(tmp_path):
    path, _ = write_with_gaps(tmp_path)
    got = read_all(sf.read_parquet(path, nulls="fill", fill={"n": 7, "x": 0.25}))
    assert got["n"].dtype == np.int64
    np.testing.assert_array_equal(got["n"][[300, 301, 599, 10]], [7, 7, 7, 10])
    np.testing.assert_array_equal(got["x"][[5, 450, 123, 301, 10]], [0.25, 0.25, 0.25, 0.25, 5.0])


def test_fill_dict_without_the_column_that_has_nulls_names_column_and_file(tmp_path):
    path, _ = write_with_gaps(tmp_path)
    with pytest.raises(ValueError) as excinfo:
        read_all(sf.read_parquet(path, nulls="fill", fill={"x": 0.0}))
    text = message(excinfo)
    assert "'n'" in text and str(path) in text


# ---------------------------------------------------------- pandas index columns
def test_pandas_index_columns_are_not_features(tmp_path):
    frame = pd.DataFrame({"id": np.arange(120), "x": np.arange(120) / 2.0})
    unnamed = frame.set_axis(np.arange(120) * 3)  # not a RangeIndex: written as __index_level_0__
    unnamed.to_parquet(tmp_path / "unnamed.parquet", row_group_size=50)
    assert "__index_level_0__" in pq.read_schema(tmp_path / "unnamed.parquet").names
    named = frame.assign(key=[f"k{i}" for i in range(120)]).set_index("key")
    named.to_parquet(tmp_path / "named.parquet", row_group_size=50)
    assert "key" in pq.read_schema(tmp_path / "named.parquet").names
    for name in ("unnamed", "named"):
        ds = sf.read_parquet(tmp_path / f"{name}.parquet")
        assert ds.source.column_names == ["id", "x"]
        got = read_all(ds)
        assert sorted(got) == ["id", "x"]
        np.testing.assert_array_equal(got["id"], np.arange(120))
    # Asked for by name, the index is an ordinary column.
    got = read_all(sf.read_parquet(tmp_path / "named.parquet", columns=["id", "key"]))
    assert list(got["key"][:3]) == ["k0", "k1", "k2"]


# ---------------------------------------------------------- dictionaries / lists
def test_dictionary_strings_with_a_different_dictionary_per_row_group(tmp_path):
    groups = [["b", "a", "b", "c"], ["z", "y", "z", "x"], ["c", "q", "q", "a"]]
    column = pa.chunked_array([pa.array(values).dictionary_encode() for values in groups])
    assert column.chunk(0).dictionary.to_pylist() != column.chunk(1).dictionary.to_pylist()
    path = tmp_path / "dict.parquet"
    pq.write_table(pa.table({"id": np.arange(12), "s": column}), path, row_group_size=4, use_dictionary=True)
    assert pa.types.is_dictionary(pq.read_schema(path).field("s").type)
    flat = [value for values in groups for value in values]
    for ds in (sf.read_parquet(path), sf.read_parquet(path).shuffle(1)):
        got = read_all(ds, batch_size=5)
        assert got["s"].dtype == object
        assert [flat[i] for i in got["id"]] == list(got["s"])


def test_pandas_categorical_and_polars_categorical_decode_to_values(tmp_path):
    names = np.array(["red", "green", "blue", "grey"], dtype=object)
    ids = np.arange(200)
    pd.DataFrame({"id": ids[:100], "c": pd.Categorical(names[ids[:100] % 3])}).to_parquet(
        tmp_path / "a.parquet", index=False, row_group_size=30
    )
    frame = pl.DataFrame({"id": ids[100:], "c": list(names[(ids[100:] % 3) + 1])}).with_columns(
        pl.col("c").cast(pl.Categorical)
    )
    frame.write_parquet(tmp_path / "b.parquet", row_group_size=30)
    got = read_all(sf.read_parquet(tmp_path).shuffle(5))
    want = np.where(got["id"] < 100, names[got["id"] % 3], names[(got["id"] % 3) + 1])
    assert list(got["c"]) == list(want)


def test_fixed_size_lists_become_two_dimensional(tmp_path):
    ids = np.arange(90)
    values = np.stack([ids, ids + 0.5, ids + 0.25], axis=1)
    pq.write_table(
        pa.table({"id": ids, "v": pa.FixedSizeListArray.from_arrays(pa.array(values.ravel()), 3)}),
        tmp_path / "pyarrow.parquet",
        row_group_size=20,
    )
    pl.DataFrame({"id": ids + 90, "v": values + 90}).write_parquet(tmp_path / "polars.parquet", row_group_size=25)
    got = read_all(sf.read_parquet(tmp_path).shuffle(4, window=3), batch_size=16)
    assert got["v"].shape == (180, 3) and got["v"].dtype == np.float64
    np.testing.assert_array_equal(got["v"], np.stack([got["id"], got["id"] + 0.5, got["id"] + 0.25], axis=1))


def test_variable_length_lists_are_ragged_or_padded_to_a_length(tmp_path):
    lists = [[1, 2], [3], [4, 5, 6], [], [7]] * 20
    path = tmp_path / "ragged.parquet"
    pl.DataFrame({"id": np.arange(100), "v": lists}).write_parquet(path, row_group_size=30)
    # Without list_lengths: ragged rows (tests/sources/test_list_columns.py).
    ragged = read_all(sf.read_parquet(path))["v"]
    assert isinstance(ragged, sf.Ragged) and ragged.to_list() == lists

    got = read_all(sf.read_parquet(path, list_lengths={"v": 4}))
    assert got["v"].shape == (100, 4)
    padded = np.array([row + [0] * (4 - len(row)) for row in lists])
    np.testing.assert_array_equal(got["v"], padded[got["id"]])

    with pytest.raises(DataError) as excinfo:
        read_all(sf.read_parquet(path, list_lengths={"v": 2}))
    text = message(excinfo)
    assert "'v'" in text and str(path) in text and "row 2 " in text


def test_row_named_after_a_filter_and_dropped_nulls_is_the_files_row(tmp_path):
    lists = [[i] for i in range(60)]
    lists[47] = [1, 2, 3]
    x = pa.array([None if i in (41, 44) else i / 2 for i in range(60)], pa.float64())
    path = tmp_path / "lists.parquet"
    pq.write_table(pa.table({"id": np.arange(60), "x": x, "v": pa.array(lists)}), path, row_group_size=20)
    ds = sf.read_parquet(path, filter=pads.field("id") >= 42, nulls="drop", list_lengths={"v": 2})
    with pytest.raises(DataError) as excinfo:
        read_all(ds)  # row group 2 holds rows 40-59: 40, 41 filtered out, 44 dropped before row 47
    text = message(excinfo)
    assert "'v'" in text and str(path) in text and "row group 2" in text and "row 47 " in text


# --------------------------------------------------------------- unreadable input
def bad_files(root: Path) -> dict[str, Path]:
    """Two good files (ids 0..199) and, beside them, a truncated file and a CSV named .parquet."""
    root.mkdir()
    pq.write_table(pa.table({"id": np.arange(100)}), root / "a-good.parquet", row_group_size=40)
    pd.DataFrame({"id": np.arange(100, 200)}).to_parquet(root / "d-good.parquet", index=False, row_group_size=40)
    whole = (root / "a-good.parquet").read_bytes()
    (root / "b-truncated.parquet").write_bytes(whole[: len(whole) // 2])
    pd.DataFrame({"id": [1, 2, 3]}).to_csv(root / "c-table.parquet", index=False)
    return {"truncated": root / "b-truncated.parquet", "csv": root / "c-table.parquet"}


@pytest.mark.parametrize("kind", ["truncated", "csv"])
def test_bad_file_raises_when_opening_naming_it(tmp_path, kind):
    files = bad_files(tmp_path / "data")
    other = files["csv" if kind == "truncated" else "truncated"]
    other.unlink()
    with pytest.raises(CorruptFileError) as excinfo:
        sf.read_parquet(tmp_path / "data")  # before any iteration
    assert str(files[kind]) in message(excinfo)
    assert isinstance(excinfo.value, OSError)


def test_skip_bad_files_reports_them_and_yields_every_other_row(tmp_path):
    files = bad_files(tmp_path / "data")
    report_path = tmp_path / "report.jsonl"
    ds = sf.read_parquet(tmp_path / "data", on_error="skip", report_path=report_path)
    assert len(ds) == 200
    for epoch in (0, 1):  # a second epoch must not report the files again
        with ds.shuffle(1, window=2).batch(32).iter_epoch(epoch) as it:
            ids = np.concatenate([b["id"] for b in it])
        np.testing.assert_array_equal(np.sort(ids), np.arange(200))
    assert ds.report.skipped_units == 2
    assert sorted(entry.path for entry in ds.report.entries) == sorted(str(p) for p in files.values())
    assert all(entry.location == "file" for entry in ds.report.entries)
    lines = [json.loads(line) for line in report_path.read_text().splitlines()]
    assert sorted(line["path"] for line in lines) == sorted(str(p) for p in files.values())
    assert all(line["reason"] for line in lines)


def test_error_budget_zero_raises_naming_the_file(tmp_path):
    files = bad_files(tmp_path / "data")
    files["csv"].unlink()
    with pytest.raises(ErrorBudgetExceeded) as excinfo:
        sf.read_parquet(tmp_path / "data", on_error="skip", max_bad_count=0)
    assert str(files["truncated"]) in message(excinfo)
    assert "raise max_bad_count" in message(excinfo)  # the hint names the argument that exists
    assert sf.read_parquet(tmp_path / "data", on_error="skip", max_bad_count=1).report.skipped_units == 1
    with pytest.raises(ErrorBudgetExceeded, match="raise max_bad_fraction"):
        sf.read_parquet(tmp_path / "data", on_error="skip", max_bad_fraction=0.0)


@pytest.mark.parametrize("errors", [{"on_error": "ignore"}, {"max_bad_fraction": 1.5}, {"max_bad_count": -1}], ids=str)
def test_a_bad_error_policy_is_refused_before_reading(tmp_path, errors):
    with pytest.raises(sf.ArgumentError, match=next(iter(errors))):
        sf.read_parquet(tmp_path / "does-not-matter.parquet", **errors)


def corrupt_row_group(path: Path, row_group: int) -> None:
    """Overwrites the first page header of a row group: the footer stays valid."""
    chunk = pq.ParquetFile(path).metadata.row_group(row_group).column(0)
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    data = bytearray(path.read_bytes())
    data[start : start + 16] = b"\xff" * 16
    path.write_bytes(bytes(data))


def test_corrupt_row_group_is_skipped_with_its_exact_row_count(tmp_path):
    path = tmp_path / "data.parquet"
    pq.write_table(pa.table({"id": np.arange(600)}), path, row_group_size=97, compression="snappy")
    corrupt_row_group(path, 1)
    with pytest.raises(CorruptFileError) as excinfo:
        read_all(sf.read_parquet(path))
    assert str(path) in message(excinfo) and "row group 1" in message(excinfo)

    ds = sf.read_parquet(path, on_error="skip")
    got = read_all(ds)
    np.testing.assert_array_equal(got["id"], np.concatenate([np.arange(97), np.arange(194, 600)]))
    assert ds.report.skipped_units == 1 and ds.report.skipped_rows == 97
    (entry,) = ds.report.entries
    assert entry.path == str(path) and "1" in entry.location and entry.rows == 97

    over = sf.read_parquet(path, on_error="skip", max_bad_fraction=0.1)  # 97 / 600 > 10 %
    with pytest.raises(ErrorBudgetExceeded) as excinfo:
        read_all(over)
    assert str(path) in message(excinfo)


def _drop_root_file_access() -> None:
    """In the child: remove CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the bounding set.

    Root ignores file modes through these capabilities; without them in the
    bounding set the exec'd interpreter never gets them back.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    pr_capbset_drop = 24
    for capability in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(pr_capbset_drop, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


_OPEN_UNREADABLE = """
import json, sys
import streamfeed as sf
try:
    ds = sf.read_parquet(sys.argv[1], on_error=sys.argv[2])
    with ds.batch(1000).iter_epoch(0) as it:
        rows = sum(len(b["id"]) for b in it)
    print(json.dumps({"rows": rows, "report": [e.path for e in ds.report.entries]}))
except Exception as exc:
    print(json.dumps({"error": type(exc).__name__, "message": str(exc), "oserror": isinstance(exc, OSError)}))
"""


def test_unreadable_file_is_named(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    pq.write_table(pa.table({"id": np.arange(50)}), root / "a.parquet")
    locked = root / "b-locked.parquet"
    pq.write_table(pa.table({"id": np.arange(50, 80)}), locked)
    locked.chmod(0)
    preexec = _drop_root_file_access if os.geteuid() == 0 else None  # root reads mode-000 files otherwise
    results = {}
    try:
        for on_error in ("raise", "skip"):
            try:
                done = subprocess.run(
                    [sys.executable, "-c", _OPEN_UNREADABLE, str(root), on_error],
                    preexec_fn=preexec,
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
            except subprocess.SubprocessError as exc:  # pragma: no cover - depends on the container
                pytest.skip(f"cannot start a child without root's file access (needs CAP_SETPCAP): {exc}")
            assert done.returncode == 0, done.stderr
            results[on_error] = json.loads(done.stdout)
    finally:
        locked.chmod(0o644)
    raised = results["raise"]
    assert raised.get("error") == "CorruptFileError" and raised["oserror"], raised
    assert str(locked) in raised["message"] and "Permission denied" in raised["message"]
    assert results["skip"] == {"rows": 50, "report": [str(locked)]}


# ------------------------------------------------------------------ memory layout
def test_the_window_is_the_datas_under_every_limit_and_one_fragment_must_fit(pyarrow_file):
    """A limit sizes read-ahead and prefetch; the window (and so the order) stays the data's, or is refused."""
    ds = sf.read_parquet(pyarrow_file).shuffle(1).batch(32)
    per_fragment = ds.source.row_bytes * 600 / 7
    roomy = [int(per_fragment * k) for k in (1000, 200, 60, 30)]
    layouts = [ds.with_options(memory_limit=limit).layout() for limit in roomy]
    assert [layout.window for layout in layouts] == [7] * 4  # all 7 row groups, whatever the limit
    assert layouts[-1].read_ahead < layouts[0].read_ahead
    for limit, layout in zip(roomy, layouts):
        assert layout.estimated_bytes <= limit
    # A tight but possible limit still reads every row exactly once.
    tight = ds.with_options(memory_limit=roomy[-1])
    with tight.iter_epoch(0) as it:
        np.testing.assert_array_equal(np.sort(np.concatenate([b["id"] for b in it])), np.arange(600))

    narrow = int(per_fragment * 16)  # holds one fragment, not two units of seven
    with pytest.raises(MemoryError) as excinfo:
        ds.with_options(memory_limit=narrow).layout()
    text = message(excinfo)
    assert "window=" in text and "memory_limit" in text
    held = int(text.split("window=")[1].split(" ")[0])
    chosen = sf.read_parquet(pyarrow_file).shuffle(1, window=held).batch(32).with_options(memory_limit=narrow)
    assert chosen.layout().estimated_bytes <= narrow

    too_small = ds.with_options(memory_limit=int(per_fragment))
    with pytest.raises(MemoryError) as excinfo:
        too_small.layout()
    text = message(excinfo)
    assert "memory_limit" in text and "fragment" in text and "rows" in text
    with pytest.raises(MemoryError):
        too_small.iter_epoch(0)


def test_unreadable_files_count_against_the_error_budget(tmp_path):
    """Files with no readable footer have no row count; they count as a share of the files."""
    directory = tmp_path / "mostly-bad"
    directory.mkdir()
    pq.write_table(pa.table({"id": np.arange(100)}), directory / "good.parquet")
    for index in range(5):
        (directory / f"bad-{index}.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(sf.ErrorBudgetExceeded, match="83.33%"):
        sf.read_parquet(directory, on_error="skip", max_bad_fraction=0.5)
    data = sf.read_parquet(directory, on_error="skip", max_bad_fraction=0.9)
    assert data.num_rows() == 100
    assert data.report.skipped_units == 5 and data.report.total_files == 6
