"""Windows over a stream (issue 24, item 2): Keras' ``timeseries_dataset_from_array`` windows, streamed.

The data are Parquet files written by pyarrow with small row groups, so
windows straddle row groups and files; the reference is Keras' own
``timeseries_dataset_from_array`` on the same rows held in memory. Every
window is told apart by its start row ``t`` (the row number, a column).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import keras
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf
from streamfeed.sources.windows import WindowSpec

ROWS = 900
# uneven series, one shorter than most windows below, one ending on a file boundary (row 400)
SERIES = [("aa", 130), ("bb", 3), ("cc", 267), ("dd", 221), ("ee", 279)]


def _columns(rows: int = ROWS) -> dict[str, np.ndarray]:
    t = np.arange(rows, dtype=np.int64)
    tickers = np.concatenate([np.full(n, name, dtype=object) for name, n in SERIES])[:rows]
    return {"t": t, "price": np.sin(t / 7.0) + t / 100.0, "volume": (t * 7919) % 113 * 1.0, "ticker": tickers}


def _write(tmp_path: Path, columns: dict[str, np.ndarray]) -> Path:
    """Two files, row groups of 37 and 50 rows: every fragment boundary a window may cross."""
    root = tmp_path / "series"
    root.mkdir()
    table = pa.table(columns)
    pq.write_table(table.slice(0, 400), root / "part-0.parquet", row_group_size=37)
    pq.write_table(table.slice(400), root / "part-1.parquet", row_group_size=50)
    return root


@pytest.fixture
def data(tmp_path: Path) -> sf.Dataset:
    return sf.read_parquet(_write(tmp_path, _columns()))


def _served(ds: sf.Dataset, batch: int = 64, epoch: int = 0) -> dict[str, np.ndarray]:
    with ds.batch(batch).iter_epoch(epoch) as stream:
        batches = [{name: np.array(column, copy=True) for name, column in chunk.items()} for chunk in stream]
    return {name: np.concatenate([b[name] for b in batches]) for name in batches[0]} if batches else {}


def _keras(data: np.ndarray, targets: np.ndarray | None, length: int, stride: int, rate: int):
    """Keras' windows (and targets, or None) of ``data`` held in memory, as arrays."""
    empty = np.zeros((0, length), dtype=data.dtype)
    if len(data) <= (length - 1) * rate:  # no window fits (Keras refuses such a short array)
        return empty, np.zeros(0)
    made = keras.utils.timeseries_dataset_from_array(
        data, targets, length, sequence_stride=stride, sampling_rate=rate, batch_size=1000
    )
    batches = [batch if targets is not None else (batch, None) for batch in made]
    windows = [np.asarray(x) for x, _ in batches]
    labels = [np.asarray(y) for _, y in batches if y is not None]
    return (np.concatenate(windows) if windows else empty), (np.concatenate(labels) if labels else np.zeros(0))


SETTINGS = [  # length, stride, sampling_rate, shift (None: the default, the sample after the window)
    (1, 1, 1, None),
    (5, 1, 1, None),
    (12, 3, 2, None),
    (40, 7, 3, 5),
    (60, 1, 1, 0),
    (3, 50, 4, 200),  # a target far past the window, many fragments ahead
]


@pytest.mark.parametrize(("length", "stride", "rate", "shift"), SETTINGS)
def test_windows_equal_keras_timeseries_dataset_from_array(data, length, stride, rate, shift):
    columns = _columns()
    ds = data.windows(
        length, stride=stride, sampling_rate=rate, shift=shift, targets={"y": "price"}, columns=["t", "price"]
    )
    offset = length * rate if shift is None else shift
    want_t, want_y = _keras(columns["t"], columns["price"][offset:], length, stride, rate)
    want_price, _ = _keras(columns["price"], columns["price"][offset:], length, stride, rate)
    assert len(want_t) > 0
    assert ds.num_rows(0) == len(want_t)  # counted exactly before the first batch
    assert len(ds.batch(64)) == -(-len(want_t) // 64)
    got = _served(ds)
    assert got["t"].shape == (len(want_t), length)
    np.testing.assert_array_equal(got["t"], want_t)
    np.testing.assert_array_equal(got["price"], want_price)
    np.testing.assert_array_equal(got["y"], want_y)


@pytest.mark.parametrize(("length", "stride", "rate"), [(5, 1, 1), (10, 3, 2), (131, 1, 1)])
def test_windows_equal_keras_without_targets(data, length, stride, rate):
    want, _ = _keras(_columns()["volume"], None, length, stride, rate)
    got = _served(data.windows(length, stride=stride, sampling_rate=rate, columns=["volume"]))
    np.testing.assert_array_equal(got["volume"] if got else np.zeros((0, length)), want)


@pytest.mark.parametrize(("length", "stride", "rate", "shift"), [(4, 1, 1, None), (9, 2, 3, 1), (130, 1, 1, 0)])
def test_windows_never_cross_a_change_of_by(data, length, stride, rate, shift):
    """Windows by ticker are Keras' windows of each series in turn, each served with its series' key."""
    columns = _columns()
    ds = data.windows(length, stride=stride, sampling_rate=rate, shift=shift, targets={"y": "price"}, by="ticker")
    offset = length * rate if shift is None else shift
    want_t, want_y, want_key = [], [], []
    start = 0
    for name, rows in SERIES:
        piece = slice(start, start + rows)
        windows, targets = _keras(columns["t"][piece], columns["price"][piece][offset:], length, stride, rate)
        want_t.append(windows.astype(np.int64).reshape(-1, length))
        want_y.append(targets if targets is not None else np.zeros(0))
        want_key += [name] * len(windows)
        start += rows
    assert ds.column_names == ["t", "price", "volume", "y", "ticker"]
    assert ds.num_rows(0) == sum(len(w) for w in want_t)
    got = _served(ds)
    np.testing.assert_array_equal(got["t"], np.concatenate(want_t))
    np.testing.assert_array_equal(got["y"], np.concatenate(want_y))
    assert got["ticker"].tolist() == want_key
    # every row of every window belongs to the window's series
    np.testing.assert_array_equal(columns["ticker"][got["t"]], np.repeat(got["ticker"][:, None], length, axis=1))


def test_a_series_coming_back_is_another_series(tmp_path):
    columns = {"t": np.arange(12), "key": np.array(list("aaabbbaaaaaa"), dtype=object)}
    ds = sf.read_parquet(_write(tmp_path, columns)).windows(3, by="key", columns=["t"])
    assert _served(ds)["t"][:, 0].tolist() == [0, 3, 6, 7, 8, 9]


def test_windows_over_rows_counted_by_reading(tmp_path):
    """With ``nulls="drop"`` the rows are known only by reading: the windows are those of the rows kept."""
    columns = _columns()
    price = columns["price"].copy()
    price[[5, 36, 37, 38, 399, 400, 401, 777]] = np.nan
    columns["price"] = price
    ds = sf.read_parquet(_write(tmp_path, columns), nulls="drop").windows(8, stride=2, targets={"y": "price"})
    kept = ~np.isnan(price)
    want_t, want_y = _keras(columns["t"][kept], price[kept][8:], 8, 2, 1)
    assert ds.num_rows(0) == len(want_t)
    got = _served(ds)
    np.testing.assert_array_equal(got["t"], want_t)
    np.testing.assert_array_equal(got["y"], want_y)


def _starts(ds: sf.Dataset, epoch: int = 0, batch: int = 50) -> np.ndarray:
    return _served(ds, batch, epoch)["t"][:, 0]


def test_a_seeded_shuffle_serves_every_window_once_in_the_seeds_order(data):
    windows = data.windows(6, stride=2, by="ticker", columns=["t"])
    everything = np.sort(_starts(windows))
    orders = {}
    for seed in (1, 2):
        for epoch in (0, 1):
            order = _starts(windows.shuffle(seed, window=3), epoch)
            np.testing.assert_array_equal(np.sort(order), everything)  # every window exactly once
            orders[seed, epoch] = order.tolist()
    assert len({tuple(order) for order in orders.values()}) == 4  # each seed and epoch its own order
    assert orders[1, 0] == _starts(windows.shuffle(1, window=3), 0).tolist()  # and the same again


def test_machine_settings_do_not_change_the_order(data):
    windows = data.windows(10, sampling_rate=2, targets={"y": "volume"}, columns=["t"]).shuffle(7)
    want = _starts(windows)
    for options in ({"read_threads": 1}, {"read_threads": 4}, {"memory_limit": "64MiB"}, {"memory_limit": "2GiB"}):
        np.testing.assert_array_equal(_starts(windows.with_options(**options)), want)


@pytest.mark.parametrize("count", [2, 3])
def test_shards_are_equal_and_disjoint(data, count):
    windows = data.windows(7, by="ticker", columns=["t"]).shuffle(3, window=2)
    total = windows.num_rows(0)
    shards = [_starts(windows.shard(index, count), batch=10) for index in range(count)]
    assert len({len(shard) for shard in shards}) == 1
    assert len(shards[0]) == total // count  # the remainder left out, never a window twice
    together = np.concatenate(shards)
    assert len(np.unique(together)) == len(together)
    assert set(together) <= set(_starts(windows))


def test_resume_mid_epoch_serves_the_rest_of_the_epoch(data):
    windows = data.windows(16, stride=3, targets={"y": "price"}, by="ticker").shuffle(11, window=4).batch(20)
    with windows.iter_epoch(1) as stream:
        uninterrupted = [np.array(chunk["t"], copy=True) for chunk in stream]
    with windows.iter_epoch(1) as stream:
        for _ in range(5):
            next(stream)
        state = stream.get_state()
    assert windows.num_batches(state=state) == len(uninterrupted) - 5
    with windows.iter_epoch(state=state) as stream:
        rest = [np.array(chunk["t"], copy=True) for chunk in stream]
    assert len(rest) == len(uninterrupted) - 5
    for got, want in zip(rest, uninterrupted[5:]):
        np.testing.assert_array_equal(got, want)


# Another value of every WindowSpec field; a new field without one fails the test below.
CHANGES = {
    "length": {"length": 9},
    "stride": {"stride": 2},
    "sampling_rate": {"sampling_rate": 2},
    "shift": {"shift": 3},
    "targets": {"targets": {"y": "volume"}},
    "by": {"by": None},
    "columns": {"columns": ["t", "volume"]},
}
BASE = {"length": 8, "stride": 1, "sampling_rate": 1, "shift": 8, "targets": {"y": "price"}, "by": "ticker"}


def test_every_window_setting_is_in_the_fingerprint(data):
    assert sorted(CHANGES) == sorted(field.name for field in dataclasses.fields(WindowSpec))
    base = data.windows(**{**BASE, "columns": ["t"]})
    with base.batch(10).iter_epoch(0) as stream:
        next(stream)
        state = stream.get_state()
    for name, change in CHANGES.items():
        other = data.windows(**{**BASE, "columns": ["t"], **change})
        assert other.fingerprint() != base.fingerprint(), name
        with pytest.raises(sf.StateError):
            other.batch(10).iter_epoch(state=state)
    assert data.windows(**{**BASE, "columns": ["t"]}).fingerprint() == base.fingerprint()


def test_windows_of_no_series_long_enough_are_none(tmp_path):
    ds = sf.read_parquet(_write(tmp_path, _columns())).windows(300, by="ticker", columns=["t"])
    assert ds.num_rows(0) == 0 and len(ds.batch(8)) == 0
    assert _served(ds) == {}


@pytest.mark.parametrize(
    ("build", "error", "words"),
    [
        (lambda ds: ds.map(lambda c: c).windows(3), sf.ArgumentError, "windows() after map()"),
        (lambda ds: ds.batch(4).windows(3), sf.ArgumentError, "windows() after"),
        (lambda ds: ds.windows(0), sf.ArgumentError, "length"),
        (lambda ds: ds.windows(3, stride=0), sf.ArgumentError, "stride"),
        (lambda ds: ds.windows(3, shift=2), sf.ArgumentError, "shift= with targets="),
        (lambda ds: ds.windows(3, targets=["price"]), sf.ArgumentError, "targets=...) is not a mapping"),
        (lambda ds: ds.windows(3, targets={"y": "prices"}), sf.UnknownNameError, "'prices'"),
        (lambda ds: ds.windows(3, by="tick"), sf.UnknownNameError, "'tick'"),
        (lambda ds: ds.windows(3, targets={"price": "price"}), sf.ArgumentError, "two columns under one name"),
        (lambda ds: ds.windows(3, by="ticker", columns=["ticker"]), sf.ArgumentError, "two columns"),
    ],
)
def test_bad_window_settings_are_refused_by_name(data, build, error, words):
    with pytest.raises(error) as raised:
        build(data)
    assert words in str(raised.value)


def test_a_list_column_is_refused_naming_it(tmp_path):
    table = pa.table({"t": np.arange(50), "tags": pa.array([[1] * (i % 3) for i in range(50)])})
    pq.write_table(table, tmp_path / "lists.parquet", row_group_size=20)
    ds = sf.read_parquet(tmp_path / "lists.parquet").windows(4)
    with pytest.raises(sf.ArgumentError, match="list column 'tags'") as raised:
        _served(ds)
    assert "lists.parquet" in str(raised.value)
    assert _served(sf.read_parquet(tmp_path / "lists.parquet").windows(4, columns=["t"]))["t"].shape == (47, 4)
