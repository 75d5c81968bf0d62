"""Contract-test factories for the CSV source (see ``tests/factories/__init__.py``)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from streamfeed.readers import read_csv


def _frame(ids: np.ndarray) -> pd.DataFrame:
    ids = np.asarray(ids, dtype=np.int64)
    return pd.DataFrame({"id": ids, "x": ids / 2.0, "name": [f"n{i % 7}" for i in ids]})


def csv_byte_ranges(tmp_path: Path):
    """One pandas file of 700 rows cut into byte-range fragments of uneven row counts.

    Every 5th name holds a quoted delimiter and newline, so fragment
    boundaries must respect quotes and rows differ in length.
    """
    frame = _frame(np.arange(700))
    frame["name"] = [f"n{i},\nz" if i % 5 == 0 else f"n{i % 7}" for i in range(700)]
    frame.to_csv(tmp_path / "one.csv", index=False)
    ds = read_csv(tmp_path / "one.csv", fragment_bytes=1700, count_cache=False)
    rows = [fragment.num_rows for fragment in ds.source.fragments]
    assert len(rows) >= 5 and len(set(rows)) > 1, rows
    return ds, np.arange(700)


def csv_directory(tmp_path: Path):
    """A directory: two pandas files (one nested) and a csv-module file (CRLF, every field quoted)."""
    root = tmp_path / "dir"
    (root / "nested").mkdir(parents=True)
    _frame(np.arange(0, 300)).to_csv(root / "a.csv", index=False)
    with open(root / "b.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, quoting=csv.QUOTE_ALL)  # \r\n line ends
        writer.writerow(["id", "x", "name"])
        writer.writerows([i, i / 2.0, f"n{i % 7}"] for i in range(300, 550))
    _frame(np.arange(550, 800)).to_csv(root / "nested" / "c.csv", index=False)
    return read_csv(root, fragment_bytes=3000, count_cache=False), np.arange(800)


def csv_gzip(tmp_path: Path):
    """Three gzip files written by pandas, of uneven sizes, each cut into several byte-range fragments."""
    root = tmp_path / "gz"
    root.mkdir()
    for number, (start, stop) in enumerate([(0, 250), (250, 330), (330, 600)]):
        _frame(np.arange(start, stop)).to_csv(root / f"part-{number}.csv.gz", index=False, compression="gzip")
    ds = read_csv(root, fragment_bytes=700, count_cache=False)
    assert len(ds.source.fragments) > 8
    return ds, np.arange(600)


FACTORIES = [
    pytest.param(csv_byte_ranges, id="csv-byte-ranges"),
    pytest.param(csv_directory, id="csv-dir"),
    pytest.param(csv_gzip, id="csv-gzip"),
]


def csv_header_only(tmp_path: Path):
    _frame(np.arange(0)).to_csv(tmp_path / "empty.csv", index=False)
    return read_csv(tmp_path / "empty.csv", count_cache=False), np.arange(0)


def csv_header_only_gzip(tmp_path: Path):
    _frame(np.arange(0)).to_csv(tmp_path / "empty.csv.gz", index=False, compression="gzip")
    return read_csv(tmp_path / "empty.csv.gz", count_cache=False), np.arange(0)


EMPTY_FACTORIES = [
    pytest.param(csv_header_only, id="csv-header-only"),
    pytest.param(csv_header_only_gzip, id="csv-header-only-gzip"),
]
