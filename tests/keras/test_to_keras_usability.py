"""``to_keras`` as a new user meets it: categorical columns, user functions, bookkeeping columns, model checks.

In-process, without training (the backend tests train for real); Keras
runs on whatever backend this process has.
"""

from __future__ import annotations

import logging

import keras
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

import streamfeed as sf

CITIES = ["paris", "lyon", "nice"]


@pytest.fixture
def table(tmp_path):
    rows = 300
    ids = np.arange(rows)
    city = np.array([CITIES[i % 3] if i % 10 else None for i in ids], dtype=object)  # every 10th null
    city[7] = "brest"  # a value the stats will not know if computed on the first 5 rows only
    path = tmp_path / "t.parquet"
    pq.write_table(
        pa.table({"x": (ids / 10).astype(np.float64), "city": pa.array(city, pa.string()), "y": (ids % 2)}),
        path,
        row_group_size=100,
    )
    return path


def first_batch(train):
    train.on_epoch_begin()
    try:
        return train[0]
    finally:
        train.close()


def test_categorical_columns_become_ids_from_the_stats_vocabulary(table):
    ds = sf.read_parquet(table, nulls="fill", fill={"city": ""}).batch(300)
    stats = sf.compute_stats(ds)
    train = ds.to_keras(label="y", inputs="dict", categorical=stats)
    x, y = first_batch(train)
    vocabulary = [value for value, _ in stats["city"].vocabulary]
    expected = [
        vocabulary.index(v) + 1 if v in vocabulary else 0
        for v in pq.read_table(table)["city"].fill_null("").to_pylist()
    ]
    assert x["city"].dtype == np.int32 and x["city"].tolist() == expected
    assert train.categorical_sizes == {"city": len(vocabulary) + 1}  # id 0: out of vocabulary and null
    assert x["x"].dtype == np.float32


def test_numeric_features_can_be_standardized_from_the_same_stats(table):
    ds = sf.read_parquet(table, nulls="fill", fill={"city": ""}).batch(300)
    stats = sf.compute_stats(ds)
    x, _ = first_batch(ds.to_keras(label="y", inputs="dict", categorical=stats, standardize=True))
    assert abs(float(np.mean(x["x"]))) < 1e-5 and abs(float(np.std(x["x"])) - 1) < 1e-3


def test_a_string_feature_without_categorical_says_how_to_encode_it(table):
    ds = sf.read_parquet(table, nulls="fill", fill={"city": ""}).batch(300)
    with pytest.raises(sf.SchemaError, match="categorical=") as excinfo:
        first_batch(ds.to_keras(label="y", inputs="dict"))
    assert "'city'" in str(excinfo.value)


def test_a_per_batch_map_sees_the_users_columns_under_to_keras(table):
    ds = sf.read_parquet(table, columns=["x", "y"]).batch(64).map(lambda c: {**c, "x2": c["x"] * 2})
    x, y = first_batch(ds.to_keras(label="y", features=["x", "x2"]))
    np.testing.assert_allclose(x[:, 1], 2 * x[:, 0])


def test_bookkeeping_columns_are_not_inferred_as_features(tmp_path):
    for name in ("a", "b"):
        (tmp_path / "imgs" / name).mkdir(parents=True)
        for number in range(3):
            Image.new("RGB", (8, 8), (number * 60, 0, 0)).save(tmp_path / "imgs" / name / f"{number}.png")
    train = sf.read_images(tmp_path / "imgs", size=(8, 8)).batch(6).to_keras(label="label")
    assert train.features == ["image"]
    x, y = first_batch(train)
    assert x.shape == (6, 8, 8, 3) and sorted(y.tolist()) == [0, 0, 0, 1, 1, 1]


def test_bookkeeping_columns_are_features_when_named(table):
    ds = sf.read_parquet(table, columns=["x", "y"]).map(lambda c: {**c, "id": np.arange(len(c["x"]))}).batch(10)
    assert ds.to_keras(label="y").features == ["x"]
    assert ds.to_keras(label="y", features=["x", "id"]).features == ["x", "id"]


def test_model_check_accepts_what_keras_accepts(table):
    ds = sf.read_parquet(table, columns=["x", "y"]).batch(32)
    inputs = keras.Input(shape=(1,), name="x")
    model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
    first_batch(ds.to_keras(label="y", inputs="dict", model=model))  # a (batch,) column feeds Input(shape=(1,))
    wrong = keras.Input(shape=(3,), name="x")
    with pytest.raises(sf.SchemaError, match="'x'"):
        first_batch(ds.to_keras(label="y", inputs="dict", model=keras.Model(wrong, keras.layers.Dense(1)(wrong))))


def test_the_input_stall_monitor_logs_a_readable_line_not_a_metric(table, caplog):
    ds = sf.read_parquet(table, columns=["x", "y"]).batch(100)
    train = ds.to_keras(label="y")
    monitor = sf.keras.InputStallMonitor(train)
    logs: dict = {"loss": 0.5}
    with caplog.at_level(logging.INFO, logger="streamfeed"):
        monitor.on_epoch_begin(0)
        train.on_epoch_begin()
        for index in range(len(train)):
            monitor.on_train_batch_begin(index)
            train[index]
            monitor.on_train_batch_end(index)
        train.on_epoch_end()
        monitor.on_epoch_end(0, logs)
    assert logs == {"loss": 0.5}  # nothing added to the progress bar or History
    assert any("input wait" in r.getMessage() and "% of step time" in r.getMessage() for r in caplog.records)
    assert monitor.history[0]["input_wait_share"] >= 0
