"""A narrow Parquet file next to a wide one: each row group is sized by its own rows.

The per-row estimate used to be the widest row group's for every row group,
so a narrow file of many rows was refused (naming it) with a size it could
never reach, at any memory limit: the dataset could not be read at all.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf
from streamfeed.readers import read_parquet

WIDE_ROWS, WIDE_BYTES = 64, 64 * 1024  # 4 MiB of long strings in one row group
NARROW_ROWS = 400_000  # 6 MiB of two int64 and a one-character string in one row group


def _write(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    pq.write_table(
        pa.table(
            {
                "id": pa.array(np.arange(WIDE_ROWS), pa.int64()),
                "x": pa.array(np.zeros(WIDE_ROWS), pa.int64()),
                "text": pa.array([f"{i:08d}".ljust(WIDE_BYTES, "w") for i in range(WIDE_ROWS)]),
            }
        ),
        data / "a-wide.parquet",
        compression="none",
        use_dictionary=False,
    )
    ids = np.arange(WIDE_ROWS, WIDE_ROWS + NARROW_ROWS)
    pq.write_table(
        pa.table({"id": pa.array(ids, pa.int64()), "x": pa.array(ids * 2, pa.int64()), "text": ["n"] * NARROW_ROWS}),
        data / "b-narrow.parquet",
        row_group_size=NARROW_ROWS,
        compression="none",
    )
    return data


def test_a_narrow_file_next_to_a_wide_one_is_read_whole_at_the_default_limit(tmp_path):
    ds = read_parquet(_write(tmp_path))
    seen = np.zeros(WIDE_ROWS + NARROW_ROWS, dtype=np.int64)
    for batch in ds.batch(8192):
        np.add.at(seen, batch["id"], 1)
        narrow = batch["id"] >= WIDE_ROWS
        assert (batch["x"][narrow] == batch["id"][narrow] * 2).all()
    assert (seen == 1).all()  # every row once


def test_the_fragment_too_large_for_the_limit_is_the_one_named(tmp_path):
    # 4 MiB of wide rows against a 6 MiB limit (a fragment must fit twice): the wide file, with its own size.
    ds = read_parquet(_write(tmp_path)).with_options(memory_limit=6 * 2**20)
    with pytest.raises(sf.MemoryLimitError) as excinfo:
        next(iter(ds.batch(64)))
    text = str(excinfo.value)
    assert "a-wide.parquet" in text and "b-narrow.parquet" not in text
    assert f"{WIDE_ROWS} rows x" in text
