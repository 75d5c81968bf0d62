"""``inspect --quality --html`` of every tabular format, written through the CLI and rendered in a real browser.

Data with no duplicate rows is the common case (the demo's, most CSVs): the
duplicates card must say "none" rather than crash formatting an estimate it
does not have, and a failed report must leave no file behind.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from test_html_browser import render

from streamfeed.cli import main

ROWS = 3000


def _columns() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    return {"id": np.arange(ROWS, dtype=np.int64), "x": rng.random(ROWS), "y": rng.integers(0, 2, ROWS)}


def _parquet(tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    table = pa.table(_columns())
    pq.write_table(table.slice(0, 1500), folder / "a.parquet", row_group_size=500)
    pq.write_table(table.slice(1500), folder / "b.parquet", row_group_size=500)
    return folder


def _csv(tmp_path):
    pacsv.write_csv(pa.table(_columns()), tmp_path / "d.csv")
    return tmp_path / "d.csv"


def _hdf5(tmp_path):
    import h5py

    with h5py.File(tmp_path / "d.h5", "w") as handle:
        for name, values in _columns().items():
            handle[name] = values
    return tmp_path / "d.h5"


def _npz(tmp_path):
    np.savez(tmp_path / "d.npz", **_columns())
    return tmp_path / "d.npz"


@pytest.mark.parametrize("make", [_parquet, _csv, _hdf5, _npz], ids=["parquet-folder", "csv", "hdf5", "npz"])
def test_the_quality_report_of_data_without_duplicates_renders(make, tmp_path, capsys):
    data = make(tmp_path)
    page = tmp_path / "report.html"
    assert main(["inspect", str(data), "--quality", "--label", "y", "--html", str(page)]) == 0, capsys.readouterr()
    _, dom = render(page, tmp_path, f"quality-{make.__name__.strip('_')}")
    assert 'id="duplicates"' in dom and "none" in dom.split('id="duplicates"')[1][:400]
