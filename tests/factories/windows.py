"""Contract-test factories for windows over a stream (``Dataset.windows``, ``sources/windows.py``).

The windows are the rows here: each serves its start row's ``id`` and ``x``
as targets at ``shift=0`` (so the contract's checks see one id per window)
beside the window itself, ``v``, of shape ``(windows, length)``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf


def _write(path: Path, series_lengths: list[int], row_group_size: int) -> np.ndarray:
    ids = np.arange(sum(series_lengths), dtype=np.int64)
    series = np.repeat(np.arange(len(series_lengths)), series_lengths)
    table = pa.table({"id": ids, "x": ids / 2.0, "v": ids * 1.0, "series": series})
    pq.write_table(table, path, row_group_size=row_group_size)
    return series


def windows_by_series(tmp_path: Path):
    """Windows of 6 rows every 2nd row, never across a series (of uneven lengths), over row groups of 61."""
    lengths = [150, 4, 333, 90, 203]
    series = _write(tmp_path / "series.parquet", lengths, row_group_size=61)
    ds = sf.read_parquet(tmp_path / "series.parquet").windows(
        6, stride=2, shift=0, targets={"id": "id", "x": "x"}, by="series", columns=["v"]
    )
    starts = np.concatenate(
        [np.arange(begin, begin + n - 5, 2) for begin, n in zip(np.cumsum([0, *lengths[:-1]]), lengths) if n >= 6]
    )
    assert (series[starts] == series[starts + 5]).all()
    return ds, starts


def windows_sampled(tmp_path: Path):
    """Windows of 4 samples every 3rd row, every 4th row: across row groups of 47 (no series)."""
    _write(tmp_path / "one.parquet", [1500], row_group_size=47)
    ds = sf.read_parquet(tmp_path / "one.parquet").windows(
        4, stride=4, sampling_rate=3, shift=0, targets={"id": "id", "x": "x"}, columns=["v"]
    )
    return ds, np.arange(0, 1500 - 9, 4)


def windows_none_long_enough(tmp_path: Path):
    """Series all shorter than the window: no window at all."""
    _write(tmp_path / "short.parquet", [5, 7, 3], row_group_size=4)
    ds = sf.read_parquet(tmp_path / "short.parquet").windows(
        8, shift=0, targets={"id": "id", "x": "x"}, by="series", columns=["v"]
    )
    return ds, np.zeros(0, dtype=np.int64)


FACTORIES = [
    pytest.param(windows_by_series, id="windows-by-series"),
    pytest.param(windows_sampled, id="windows-sampled"),
]
EMPTY_FACTORIES = [pytest.param(windows_none_long_enough, id="windows-none")]
