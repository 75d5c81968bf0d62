"""Contract-test factories for the Parquet source (see ``tests/factories/__init__.py``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

import streamfeed as sf


def _columns(ids: np.ndarray) -> dict[str, np.ndarray]:
    ids = np.asarray(ids, dtype=np.int64)
    return {"id": ids, "x": ids / 2.0, "name": np.array([f"n{i % 7}" for i in ids], dtype=object)}


def parquet_single_file(tmp_path: Path):
    """One file of 700 rows in row groups of 97 (the last one 27)."""
    ids = np.arange(700)
    pq.write_table(pa.table(_columns(ids)), tmp_path / "one.parquet", row_group_size=97)
    return sf.read_parquet(tmp_path / "one.parquet"), ids


def parquet_directory(tmp_path: Path):
    """A directory with one file per real writer, of different row-group sizes."""
    root = tmp_path / "dir"
    (root / "nested").mkdir(parents=True)
    pq.write_table(pa.table(_columns(np.arange(0, 300))), root / "a.parquet", row_group_size=97)
    pd.DataFrame(_columns(np.arange(300, 550))).to_parquet(root / "b.parquet", index=False, row_group_size=60)
    pl.DataFrame(_columns(np.arange(550, 800))).write_parquet(root / "nested" / "c.parquet", row_group_size=128)
    return sf.read_parquet(root), np.arange(800)


def parquet_hive(tmp_path: Path):
    """A hive tree partitioned by an int and a string column (pyarrow.dataset)."""
    ids = np.arange(600)
    table = pa.table({**_columns(ids), "part": ids % 3, "tag": np.array(["a", "b c"], dtype=object)[ids % 2]})
    pads.write_dataset(
        table,
        tmp_path / "hive",
        format="parquet",
        partitioning=["part", "tag"],
        partitioning_flavor="hive",
        max_rows_per_group=40,
        min_rows_per_group=40,
    )
    return sf.read_parquet(tmp_path / "hive"), ids


def parquet_glob(tmp_path: Path):
    """A glob that matches four of five files (``other.parquet`` must stay out)."""
    root = tmp_path / "glob"
    root.mkdir()
    for number in range(4):
        ids = np.arange(number * 150, (number + 1) * 150)
        pq.write_table(pa.table(_columns(ids)), root / f"part-{number}.parquet", row_group_size=64)
    pq.write_table(pa.table(_columns(np.arange(10_000, 10_050))), root / "other.parquet")
    return sf.read_parquet(str(root / "part-*.parquet")), np.arange(600)


FACTORIES = [
    pytest.param(parquet_single_file, id="parquet-file"),
    pytest.param(parquet_directory, id="parquet-dir"),
    pytest.param(parquet_hive, id="parquet-hive"),
    pytest.param(parquet_glob, id="parquet-glob"),
]


def _empty(ids: np.ndarray) -> dict[str, np.ndarray]:
    return {"id": np.asarray(ids, dtype=np.int64), "x": np.asarray(ids, dtype=np.float64) / 2.0}


def parquet_zero_rows_pyarrow(tmp_path: Path):
    pq.write_table(pa.table(_empty([])), tmp_path / "empty.parquet")
    return sf.read_parquet(tmp_path / "empty.parquet"), np.arange(0)


def parquet_zero_rows_pandas(tmp_path: Path):
    pd.DataFrame(_empty([])).to_parquet(tmp_path / "empty.parquet", index=False)
    return sf.read_parquet(tmp_path / "empty.parquet"), np.arange(0)


def parquet_zero_rows_polars(tmp_path: Path):
    pl.DataFrame(_empty([])).write_parquet(tmp_path / "empty.parquet")
    return sf.read_parquet(tmp_path / "empty.parquet"), np.arange(0)


def parquet_filter_matching_nothing(tmp_path: Path):
    pq.write_table(pa.table(_empty(np.arange(300))), tmp_path / "data.parquet", row_group_size=50)
    return sf.read_parquet(tmp_path / "data.parquet", filter=pads.field("id") < 0), np.arange(0)


EMPTY_FACTORIES = [
    pytest.param(parquet_zero_rows_pyarrow, id="parquet-zero-rows-pyarrow"),
    pytest.param(parquet_zero_rows_pandas, id="parquet-zero-rows-pandas"),
    pytest.param(parquet_zero_rows_polars, id="parquet-zero-rows-polars"),
    pytest.param(parquet_filter_matching_nothing, id="parquet-filter-nothing"),
]
