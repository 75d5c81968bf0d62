"""Issue 10, section 3: the quality report agrees with the schema table, withholds a duplicate
estimate it cannot tell from 0, checks dates and timestamps for sortedness, and counts in integers."""

from __future__ import annotations

import datetime as dt
import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf
from streamfeed.inspect import inspect
from streamfeed.inspect.quality import quality_report
from streamfeed.inspect.render import render_quality


def _schema_and_quality_nulls(path) -> tuple[dict, dict]:
    report = inspect(path, full=True, quality=True)
    rows = report.quality["rows"]
    schema = {column.name: column.nulls for column in report.columns if column.type != "partition"}
    quality = {name: round(column["null_rate"] * rows) for name, column in report.quality["columns"].items()}
    return schema, quality


def test_csv_null_counts_agree_between_the_schema_table_and_the_quality_report(tmp_path):
    rng = np.random.default_rng(0)
    n = 2000
    city = rng.choice(["paris", "lyon", "nice"], n).astype(object)
    city[rng.choice(n, 50, replace=False)] = ""  # empty fields: missing cities
    code = rng.integers(0, 9, n).astype(str).astype(object)
    code[rng.choice(n, 30, replace=False)] = "NA"
    x = np.round(rng.random(n), 6).astype(str).astype(object)
    x[rng.choice(n, 20, replace=False)] = ""
    lines = ["city,code,x"] + [f"{a},{b},{c}" for a, b, c in zip(city, code, x)]
    (tmp_path / "d.csv").write_text("\n".join(lines) + "\n")
    schema, quality = _schema_and_quality_nulls(tmp_path / "d.csv")
    assert schema == {"city": 50, "code": 30, "x": 20}
    assert quality == schema


def test_parquet_null_counts_agree_when_a_file_lacks_a_column(tmp_path):
    n = 1000
    x = np.arange(n, dtype=np.float64)
    x[::10] = np.nan  # NaN is not a null in either table
    table = pa.table(
        {"a": pa.array(x, mask=np.arange(n) % 7 == 0), "s": pa.array(["u"] * n, mask=np.arange(n) % 3 == 0)}
    )
    pq.write_table(table, tmp_path / "p0.parquet", row_group_size=300)
    pq.write_table(pa.table({"a": pa.array(x)}), tmp_path / "p1.parquet")  # no column "s": read as nulls
    schema, quality = _schema_and_quality_nulls(tmp_path)
    assert schema == {"a": 143, "s": 334 + n}
    assert quality == schema


def _render(quality: dict) -> str:
    from rich.console import Console

    console = Console(file=io.StringIO(), width=200, record=True)
    render_quality(quality, console)
    return console.export_text()


def test_the_duplicate_headline_gives_no_point_estimate_when_its_interval_includes_zero(tmp_path):
    n = 60_000  # unique rows, past the sketch's exact range
    pq.write_table(pa.table({"id": np.arange(n), "x": np.random.default_rng(1).random(n)}), tmp_path / "u.parquet")
    report = quality_report(tmp_path / "u.parquet")
    duplicates = report.duplicates
    assert duplicates["range_95"][0] == 0 < duplicates["range_95"][1]
    assert duplicates["estimated"] is None
    assert duplicates["headline"].startswith("none detected")
    assert not any("duplicate" in warning for warning in report.warnings)
    line = next(line for line in _render(report.to_dict()).splitlines() if line.startswith("duplicates"))
    assert line.startswith("duplicates: none detected") and f"0–{duplicates['range_95'][1]:,}" in line


def test_the_duplicate_headline_keeps_its_estimate_when_duplicates_are_certain(tmp_path):
    rng = np.random.default_rng(2)
    rows = rng.random((20_000, 2))
    rows[15_000:] = rows[:5_000]
    pq.write_table(pa.table({"a": rows[:, 0], "b": rows[:, 1]}), tmp_path / "d.parquet")
    duplicates = quality_report(tmp_path / "d.parquet").duplicates
    assert duplicates["range_95"][0] > 0 and isinstance(duplicates["estimated"], int)
    assert isinstance(duplicates["distinct_estimate"], int)
    line = next(line for line in _render({"rows": 20_000, "duplicates": duplicates}).splitlines())
    assert line.startswith(f"duplicates: about {duplicates['estimated']:,}")


def _time_sorted_table(n: int) -> pa.Table:
    rng = np.random.default_rng(3)
    start = dt.datetime(2021, 3, 1)
    when = [start + dt.timedelta(minutes=13 * i) for i in range(n)]
    return pa.table(
        {
            "when": pa.array(when, type=pa.timestamp("s")),
            "day": pa.array([t.date() for t in when], type=pa.date32()),
            "noise": rng.random(n),
        }
    )


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_time_sorted_file_is_flagged(tmp_path, fmt):
    table = _time_sorted_table(3000)
    if fmt == "csv":
        import pyarrow.csv as pacsv

        path = tmp_path / "t.csv"
        pacsv.write_csv(table, path)
    else:
        path = tmp_path / "t.parquet"
        pq.write_table(table, path, row_group_size=700)
    report = quality_report(path)
    assert report.row_order["when"] > 0.99 and report.row_order["day"] > 0.99 and abs(report.row_order["noise"]) < 0.1
    assert any("'when' follows the row order" in warning for warning in report.warnings)
    assert any("'day' follows the row order" in warning for warning in report.warnings)
    assert report.columns["when"]["datetime"] in ("timestamp[s]", "timestamp[ms]")  # Parquet stores seconds as ms
    assert report.columns["day"]["datetime"] == "date32[day]" and report.columns["noise"]["datetime"] is None


def test_datetime64_columns_of_a_dataset_are_checked_for_order_and_not_as_nulls(tmp_path):
    n = 2000
    pq.write_table(
        pa.table({"t": np.arange(n, dtype=np.int64), "x": np.random.default_rng(4).random(n)}), tmp_path / "p.parquet"
    )

    def as_datetime64(chunk):
        times = (chunk["t"] * 60).astype("datetime64[s]")
        times[::100] = np.datetime64("NaT")
        return {"t": times, "x": chunk["x"]}

    report = quality_report(sf.read_parquet(tmp_path / "p.parquet").map(as_datetime64))
    assert report.row_order["t"] > 0.99
    assert (
        report.columns["t"]["null_rate"] == pytest.approx(0.01) and report.columns["t"]["datetime"] == "datetime64[s]"
    )
