"""Dates, timestamps, times and durations become float64 seconds (since the epoch, UTC) in every Arrow source."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

import streamfeed as sf
from streamfeed.errors import DataError
from streamfeed.files.arrow import seconds_to_arrow, temporal_columns

UTC = dt.timezone.utc


def _epoch(value: dt.datetime) -> float:
    return (value - dt.datetime(1970, 1, 1, tzinfo=UTC)).total_seconds()


def _all(dataset) -> dict:
    with dataset.iter_epoch(0) as epoch:
        chunks = list(epoch)
    return {name: np.concatenate([chunk[name] for chunk in chunks]) for name in chunks[0]}


def test_parquet_dates_and_timestamps_are_float64_seconds_since_the_epoch_utc(tmp_path):
    moments = [dt.datetime(2021, 3, 28, 0, 30, 15, 250_000), dt.datetime(1969, 7, 20, 20, 17, 40)]
    paris = [m.replace(tzinfo=dt.timezone(dt.timedelta(hours=1))) for m in moments]
    table = pa.table(
        {
            "naive_s": pa.array([m.replace(microsecond=0) for m in moments], type=pa.timestamp("s")),
            "naive_us": pa.array(moments, type=pa.timestamp("us")),
            "naive_ns": pa.array(moments, type=pa.timestamp("ns")),
            "paris_ms": pa.array(paris, type=pa.timestamp("ms", tz="Europe/Paris")),
            "day32": pa.array([m.date() for m in moments], type=pa.date32()),
            "day64": pa.array([m.date() for m in moments], type=pa.date64()),
            "x": [1.0, 2.0],
        }
    )
    pq.write_table(table, tmp_path / "t.parquet")
    got = _all(sf.read_parquet(tmp_path / "t.parquet"))
    for name in ("naive_s", "naive_us", "naive_ns", "paris_ms", "day32", "day64"):
        assert got[name].dtype == np.float64, name
    naive = [_epoch(m.replace(tzinfo=UTC)) for m in moments]  # naive timestamps are taken as UTC
    assert got["naive_s"].tolist() == [_epoch(m.replace(microsecond=0, tzinfo=UTC)) for m in moments]
    assert got["naive_us"].tolist() == pytest.approx(naive, abs=1e-6)
    assert got["naive_ns"].tolist() == pytest.approx(naive, abs=1e-6)
    assert got["paris_ms"].tolist() == pytest.approx([_epoch(m) for m in paris], abs=1e-3)  # converted to UTC
    midnight = [_epoch(dt.datetime.combine(m.date(), dt.time(), UTC)) for m in moments]
    assert got["day32"].tolist() == midnight and got["day64"].tolist() == midnight


def test_times_of_day_and_durations_are_float64_seconds(tmp_path):
    table = pa.table(
        {
            "at": pa.array([dt.time(1, 2, 3, 500_000), dt.time(23, 59, 59)], type=pa.time64("us")),
            "at_s": pa.array([dt.time(1, 2, 3), dt.time(0, 0, 1)], type=pa.time32("s")),
            "took": pa.array([dt.timedelta(milliseconds=1500), dt.timedelta(days=-1)], type=pa.duration("ms")),
        }
    )
    pq.write_table(table, tmp_path / "t.parquet")
    got = _all(sf.read_parquet(tmp_path / "t.parquet"))
    assert got["at"].tolist() == [3723.5, 86399.0] and got["at_s"].tolist() == [3723.0, 1.0]
    assert got["took"].tolist() == [1.5, -86400.0]
    assert {got[name].dtype for name in got} == {np.dtype(np.float64)}


def test_csv_iso_dates_and_timestamps_are_float64_seconds(tmp_path):
    (tmp_path / "d.csv").write_text(
        "day,when,zoned,x\n"
        "2020-01-02,2020-01-02 03:04:05,2020-01-02T03:04:05+01:00,1\n"
        "1999-12-31,1999-12-31T23:59:59.5,1999-12-31T23:59:59Z,2\n"
    )
    got = _all(sf.read_csv(tmp_path / "d.csv"))
    assert got["day"].tolist() == [
        _epoch(dt.datetime(2020, 1, 2, tzinfo=UTC)),
        _epoch(dt.datetime(1999, 12, 31, tzinfo=UTC)),
    ]
    assert got["when"].tolist() == [
        _epoch(dt.datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC)),
        _epoch(dt.datetime(1999, 12, 31, 23, 59, 59, 500_000, tzinfo=UTC)),
    ]
    assert got["zoned"].tolist() == [
        _epoch(dt.datetime(2020, 1, 2, 2, 4, 5, tzinfo=UTC)),
        _epoch(dt.datetime(1999, 12, 31, 23, 59, 59, tzinfo=UTC)),
    ]


def test_null_policies_apply_to_converted_dates(tmp_path):
    day = pa.array([dt.date(2020, 1, 1), None, dt.date(2020, 1, 3)], type=pa.date32())
    pq.write_table(pa.table({"day": day, "x": [1.0, 2.0, 3.0]}), tmp_path / "n.parquet")
    with pytest.raises(DataError, match="'day'"):
        _all(sf.read_parquet(tmp_path / "n.parquet"))
    assert _all(sf.read_parquet(tmp_path / "n.parquet", nulls="drop"))["day"].tolist() == [1577836800.0, 1578009600.0]
    filled = _all(sf.read_parquet(tmp_path / "n.parquet", nulls="fill", fill={"day": 0.0, "x": 0.0}))
    assert filled["day"].tolist() == [1577836800.0, 0.0, 1578009600.0]
    as_date = _all(sf.read_parquet(tmp_path / "n.parquet", nulls="fill", fill={"day": dt.date(2020, 1, 2), "x": 0.0}))
    assert as_date["day"].tolist() == [1577836800.0, 1577923200.0, 1578009600.0]


def test_converted_columns_feed_keras_packing(tmp_path):
    when = pa.array([dt.datetime(2020, 1, 1) + dt.timedelta(hours=i) for i in range(8)], type=pa.timestamp("ms"))
    pq.write_table(pa.table({"when": when, "y": np.arange(8.0)}), tmp_path / "k.parquet")
    batch = next(iter(sf.read_parquet(tmp_path / "k.parquet").batch(8)))
    assert batch["when"].dtype == np.float64 and np.all(np.diff(batch["when"]) == 3600.0)


def test_temporal_columns_and_the_way_back_to_arrow():
    schema = pa.schema(
        [("a", pa.timestamp("ms", tz="Europe/Paris")), ("b", pa.date32()), ("c", pa.float64()), ("d", pa.duration("s"))]
    )
    assert temporal_columns(schema) == {"a": "timestamp[ms, tz=Europe/Paris]", "b": "date32[day]", "d": "duration[s]"}
    values = np.array([0.0, 86400.0 * 365.25 * 50 + 0.125, np.nan])
    back = seconds_to_arrow(values, pa.timestamp("ms", tz="Europe/Paris"))
    assert back.type == pa.timestamp("ms", tz="Europe/Paris") and back.null_count == 1
    assert back[1].as_py() == dt.datetime.fromtimestamp(values[1], UTC).replace(microsecond=125_000)
    days = seconds_to_arrow(np.array([0.0, 86400.0]), pa.date32())
    assert days.to_pylist() == [dt.date(1970, 1, 1), dt.date(1970, 1, 2)]


def test_csv_and_parquet_agree_on_the_same_dates(tmp_path):
    table = pa.table(
        {
            "when": pa.array(
                [dt.datetime(2022, 5, 6, 7, 8, 9) + dt.timedelta(days=i) for i in range(5)], type=pa.timestamp("s")
            )
        }
    )
    pq.write_table(table, tmp_path / "w.parquet")
    pacsv.write_csv(table, tmp_path / "w.csv")
    assert (
        _all(sf.read_csv(tmp_path / "w.csv"))["when"].tolist()
        == _all(sf.read_parquet(tmp_path / "w.parquet"))["when"].tolist()
    )
