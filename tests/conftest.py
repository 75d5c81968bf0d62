"""Tiny Parquet inputs written by the real writers: pyarrow, pandas and polars.

Every table has an integer ``id`` column (unique across the files of one
fixture) and columns derived from it, so a test can tell exactly which rows
came out and that each row's values stayed together:

    x = id / 2 (float64), label = id % 3 (int64), name = "n{id % 5}" (string)

Files have several row groups (the fragments), of uneven sizes where that
matters, so batches straddle fragments.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

ROWS_PER_FILE = 600
ROW_GROUP = 97  # several, uneven row groups per file
HIVE_CITIES = ("paris", "new york", "são paulo", "a/b")


def columns_for(ids: np.ndarray) -> dict[str, np.ndarray]:
    """The columns of the rows with these ids (the one truth tests compare to)."""
    ids = np.asarray(ids, dtype=np.int64)
    return {
        "id": ids,
        "x": ids / 2.0,
        "label": ids % 3,
        "name": np.array([f"n{i % 5}" for i in ids], dtype=object),
    }


def write_with_pyarrow(path: Path, ids: np.ndarray, row_group_size: int = ROW_GROUP) -> Path:
    pq.write_table(pa.table(columns_for(ids)), path, row_group_size=row_group_size)
    return path


def write_with_pandas(path: Path, ids: np.ndarray, row_group_size: int = ROW_GROUP) -> Path:
    pd.DataFrame(columns_for(ids)).to_parquet(path, engine="pyarrow", index=False, row_group_size=row_group_size)
    return path


def write_with_polars(path: Path, ids: np.ndarray, row_group_size: int = ROW_GROUP) -> Path:
    pl.DataFrame(columns_for(ids)).write_parquet(path, row_group_size=row_group_size)
    return path


WRITERS: dict[str, Callable[..., Path]] = {
    "pyarrow": write_with_pyarrow,
    "pandas": write_with_pandas,
    "polars": write_with_polars,
}


@pytest.fixture
def expected_columns() -> Callable[[np.ndarray], dict[str, np.ndarray]]:
    """``expected_columns(ids)``: the values the fixture files hold for these ids."""
    return columns_for


@pytest.fixture(params=sorted(WRITERS))
def writer(request) -> Callable[..., Path]:
    """Each real writer in turn: ``writer(path, ids, row_group_size=...)``."""
    return WRITERS[request.param]


@pytest.fixture
def pyarrow_file(tmp_path) -> Path:
    """One file, ids 0..599, row groups of 97 rows (the last one shorter)."""
    return write_with_pyarrow(tmp_path / "pyarrow.parquet", np.arange(ROWS_PER_FILE))


@pytest.fixture
def pandas_file(tmp_path) -> Path:
    return write_with_pandas(tmp_path / "pandas.parquet", np.arange(ROWS_PER_FILE))


@pytest.fixture
def polars_file(tmp_path) -> Path:
    return write_with_polars(tmp_path / "polars.parquet", np.arange(ROWS_PER_FILE))


@pytest.fixture
def mixed_dir(tmp_path) -> Path:
    """A directory with one file per writer; ids 0..1799, unique across files."""
    root = tmp_path / "mixed"
    root.mkdir()
    for number, name in enumerate(sorted(WRITERS)):
        ids = np.arange(number * ROWS_PER_FILE, (number + 1) * ROWS_PER_FILE)
        WRITERS[name](root / f"part-{number}.parquet", ids)
    return root


@pytest.fixture
def hive_dir(tmp_path) -> Path:
    """A hive tree ``year=<int>/city=<string>/`` written by ``pyarrow.dataset``.

    City names hold a space, a slash and non-ASCII letters, which the writer
    URI-encodes in the directory names. ``year = 2020 + id % 3`` and
    ``city = CITIES[id % 4]`` let tests check each row's partition values.
    """
    ids = np.arange(ROWS_PER_FILE)
    table = pa.table(
        {
            **columns_for(ids),
            "year": 2020 + ids % 3,
            "city": np.array(HIVE_CITIES, dtype=object)[ids % len(HIVE_CITIES)],
        }
    )
    root = tmp_path / "hive"
    pads.write_dataset(
        table,
        root,
        format="parquet",
        partitioning=["year", "city"],
        partitioning_flavor="hive",
        max_rows_per_group=20,
        min_rows_per_group=20,
    )
    return root


@pytest.fixture
def live_threads() -> Callable[[], list[str]]:
    """``live_threads()`` names the ``streamfeed-*`` threads alive right now."""

    def names() -> list[str]:
        return sorted(
            thread.name
            for thread in threading.enumerate()
            if thread.name.startswith("streamfeed-") and thread.is_alive()
        )

    return names
