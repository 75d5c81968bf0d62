"""Statistics of dates and timestamps: computed in the pipeline's units (float64 seconds since the
epoch, UTC), recorded as dates, saved as JSON and loaded back; ``streamfeed stats`` writes them."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf
from streamfeed.stats import Stats, compute_stats

UTC = dt.timezone.utc


def _dated_csv(path: Path, n: int = 2000) -> list[dt.datetime]:
    start = dt.datetime(2020, 1, 1)
    when = [start + dt.timedelta(minutes=17 * i) for i in range(n)]
    rng = np.random.default_rng(0)
    lines = ["id,city,when,day,x"]
    for i, moment in enumerate(when):
        lines.append(f"{i},{'paris lyon nice'.split()[i % 3]},{moment.isoformat()},{moment.date()},{rng.random():.6f}")
    path.write_text("\n".join(lines) + "\n")
    return when


def test_date_columns_are_numeric_seconds_recorded_as_dates_and_round_trip(tmp_path):
    when = _dated_csv(tmp_path / "d.csv")
    stats = compute_stats(sf.read_csv(tmp_path / "d.csv"))
    seconds = np.array([moment.replace(tzinfo=UTC).timestamp() for moment in when])
    column = stats["when"]
    assert column.kind == "numeric" and column.datetime == "timestamp[s]"
    assert (column.min, column.max) == (seconds.min(), seconds.max())
    assert column.mean == pytest.approx(seconds.mean()) and column.std == pytest.approx(seconds.std())
    assert column.min_datetime == dt.datetime(2020, 1, 1, tzinfo=UTC) and column.max_datetime == when[-1].replace(
        tzinfo=UTC
    )
    assert (
        stats["day"].datetime == "date32[day]"
        and stats["day"].max == dt.datetime.combine(when[-1].date(), dt.time(), UTC).timestamp()
    )
    assert stats["x"].datetime is None and stats["city"].datetime is None
    stats.save(tmp_path / "s.json")
    data = json.loads((tmp_path / "s.json").read_text())
    assert data["columns"]["when"]["min_iso"] == "2020-01-01T00:00:00+00:00"
    assert data["columns"]["day"]["max_iso"] == f"{when[-1].date()}T00:00:00+00:00"
    loaded = Stats.load(tmp_path / "s.json")
    assert loaded.to_dict() == stats.to_dict()
    assert loaded["when"].quantile(0.5) == pytest.approx(np.quantile(seconds, 0.5), abs=17 * 60)


def test_datetime64_columns_of_a_map_are_converted_and_nat_is_a_null(tmp_path):
    n = 1000
    pq.write_table(pa.table({"t": np.arange(n, dtype=np.int64)}), tmp_path / "p.parquet")

    def as_datetime64(chunk):
        times = (chunk["t"] * 3600).astype("datetime64[s]")
        times[::10] = np.datetime64("NaT")
        return {"t": times}

    stats = compute_stats(sf.read_parquet(tmp_path / "p.parquet").map(as_datetime64))
    column = stats["t"]
    kept = np.arange(n)[np.arange(n) % 10 != 0] * 3600.0
    assert column.kind == "numeric" and column.datetime == "datetime64[s]"
    assert (column.nulls, column.nans, column.count) == (100, 0, 900)
    assert (column.min, column.max) == (kept.min(), kept.max()) and column.mean == pytest.approx(kept.mean())
    stats.save(tmp_path / "s.json")
    assert Stats.load(tmp_path / "s.json")["t"].max_datetime == dt.datetime.fromtimestamp(kept.max(), UTC)


def test_python_date_values_are_saved_as_iso_text_and_loaded_back(tmp_path):
    n = 300
    pq.write_table(pa.table({"k": np.arange(n) % 3, "y": np.arange(n) % 2}), tmp_path / "p.parquet")
    days = np.array([dt.date(2020, 1, 1), dt.date(2020, 1, 2), dt.date(2021, 6, 30)], dtype=object)
    moments = np.array([dt.datetime(2020, 1, 1, 12), dt.datetime(2020, 1, 2, 8, 30)], dtype=object)

    def as_objects(chunk):
        return {"day": days[chunk["k"]], "at": moments[chunk["y"]], "y": moments[chunk["y"]]}

    stats = compute_stats(sf.read_parquet(tmp_path / "p.parquet").map(as_objects), label="y")
    assert stats["day"].kind == "categorical" and stats["day"].value_type == "date"
    assert stats["at"].value_type == "datetime"
    stats.save(tmp_path / "s.json")
    data = json.loads((tmp_path / "s.json").read_text())
    assert ["2020-01-01", 100] in data["columns"]["day"]["vocabulary"]
    loaded = Stats.load(tmp_path / "s.json")
    assert dict(loaded["day"].vocabulary) == dict.fromkeys(days, 100)
    assert dict(loaded["at"].vocabulary) == {moments[0]: 150, moments[1]: 150}
    assert loaded.label_counts == {moments[0]: 150, moments[1]: 150}


def test_a_failed_save_writes_nothing(tmp_path):
    np.save(tmp_path / "x.npy", np.arange(10.0))
    stats = compute_stats(sf.read_numpy(tmp_path / "x.npy"))
    stats.columns["x"].min = object()  # something JSON cannot hold
    with pytest.raises(ValueError, match="JSON cannot write"):
        stats.save(tmp_path / "s.json")
    assert os.listdir(tmp_path) == ["x.npy"]


def test_streamfeed_stats_writes_dates(tmp_path):
    """The console command used to crash after the whole pass (datetime is not JSON serializable)."""
    _dated_csv(tmp_path / "d.csv")
    out = tmp_path / "x.json"
    script = Path(sys.executable).parent / "streamfeed"  # the console script pip installed beside this Python
    command = [str(script)] if script.exists() else [sys.executable, "-m", "streamfeed.cli"]
    env = {**os.environ, "COLUMNS": "200"}
    done = subprocess.run(
        [*command, "stats", str(tmp_path / "d.csv"), "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(tmp_path)) == ["d.csv", "x.json"]
    stats = Stats.load(out)
    assert stats.rows == 2000 and stats["when"].datetime == "timestamp[s]"
    assert stats["when"].min_datetime == dt.datetime(2020, 1, 1, tzinfo=UTC)
