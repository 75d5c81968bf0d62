"""DataQualityMonitor: label noise estimated and suspects ranked during a real fit, on every backend.

Keras fixes its backend at import, so each backend runs ``_quality_driver.py``
once in a subprocess (one run shared by the tests that look at it). Each
backend uses another data seed and another way of training, so together they
check three seeds, logits and softmax outputs, and ``steps_per_execution``
(one ``on_train_batch_end`` for several batches). The estimator's own pieces
(margins, the bounded sample, the report) are checked in this process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from streamfeed.errors import ArgumentError
from streamfeed.inspect.image_quality import measure_image
from streamfeed.keras.label_noise import MarginLedger, margins_and_losses

DRIVER = Path(__file__).parent / "_quality_driver.py"
ROWS, BATCH, EPOCHS = 6000, 128, 5  # as in the driver
# backend -> (data seed, steps_per_execution, softmax outputs)
SETUPS = {"tensorflow": (0, 3, False), "jax": (1, 4, False), "torch": (2, 1, True)}


class Runs:
    def __init__(self, directory: Path) -> None:
        self.directory, self.results = directory, {}

    def get(self, backend: str) -> dict:
        if backend not in self.results:
            seed, spe, softmax = SETUPS[backend]
            directory = self.directory / backend
            directory.mkdir()
            args = {"dir": str(directory), "seed": seed, "spe": spe, "softmax": softmax}
            env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2"}
            proc = subprocess.run(
                [sys.executable, str(DRIVER), json.dumps(args)], env=env, capture_output=True, text=True, timeout=300
            )
            assert proc.returncode == 0, proc.stderr[-4000:]
            line = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")][-1]
            self.results[backend] = json.loads(line[len("RESULT ") :])
        return self.results[backend]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Runs:
    return Runs(tmp_path_factory.mktemp("quality"))


@pytest.mark.backend
@pytest.mark.parametrize("backend", sorted(SETUPS))
def test_flipped_labels_are_estimated_and_ranked_first(runs, backend):
    result = runs.get(backend)
    assert result["backend"] == backend
    noisy, flipped = result["noisy"], set(result["flipped"])
    assert len(flipped) == ROWS // 10
    assert abs(noisy["rate"] - 0.10) <= 0.03, noisy["rate"]
    top = noisy["suspects"]
    assert noisy["written"] == len(top) == len(flipped)
    precision = np.mean([row["id"] in flipped for row in top])
    assert precision >= 0.8, precision
    assert [row["rank"] for row in top] == list(range(1, len(top) + 1))
    margins = [row["mean_margin"] for row in top]
    assert margins == sorted(margins)
    # Every row was measured once per epoch, also when Keras reports one batch end per execution.
    assert noisy["rows_measured"] == [float(ROWS)] * EPOCHS
    assert all(row["times_trained"] == EPOCHS for row in top)
    # The estimate reaches Keras's logs (History) every epoch, and the streamfeed logger.
    assert len(noisy["logged_rates"]) == EPOCHS and noisy["logged_rates"][-1] == pytest.approx(noisy["rate"])
    assert any("estimated label noise" in message for message in result["log"])


@pytest.mark.backend
@pytest.mark.parametrize("backend", sorted(SETUPS))
def test_clean_labels_give_a_low_estimate(runs, backend):
    clean = runs.get(backend)["clean"]
    assert clean["rate"] <= 0.02, clean["rate"]
    # every=2 measures the batches with an even number: 24 of 47, the last (even, 46) holding 6000 - 46 * 128 rows.
    assert clean["rows_measured"] == [float(23 * BATCH + (ROWS - 46 * BATCH))] * EPOCHS
    # Without top=, the report holds the rows below the threshold: as many as the estimate says.
    assert 0.9 * ROWS <= clean["tracked"] <= ROWS  # a row misses every even batch of five epochs with p = 1/32
    assert clean["written"] == len(clean["suspects"]) == round(clean["rate"] * clean["tracked"])


@pytest.mark.backend
@pytest.mark.parametrize("backend", sorted(SETUPS))
def test_image_folder_suspects_are_paths_and_epochs_log_blur_and_exposure(runs, backend):
    result = runs.get(backend)
    images, misfiled, dark = result["images"], set(result["misfiled"]), result["dark"]
    top = images["suspects"]
    assert len(top) == len(misfiled) == 12
    assert all(row["path"] == row["id"] and os.path.isfile(row["path"]) for row in top)
    assert np.mean([row["id"] in misfiled for row in top]) >= 0.8
    # What was trained, per epoch, equals what inspect measures on the files (every image is trained once an epoch).
    files = sorted(str(p) for p in Path(next(iter(misfiled))).parents[1].rglob("*.png"))
    measured = [measure_image(file) for file in files]
    history = images["history"]
    assert len(history["image_blur_median"]) == 8
    assert history["image_blur_median"][-1] == pytest.approx(np.median([m["blur"] for m in measured]), rel=0.02)
    assert history["image_brightness_mean"][-1] == pytest.approx(np.mean([m["brightness"] for m in measured]), abs=1)
    assert history["image_dark_share"][-1] == pytest.approx(len(dark) / len(files))
    assert history["image_bright_share"][-1] == 0.0


# ------------------------------------------------------------ in-process parts
def test_the_monitor_refuses_a_dataset_without_ids(tmp_path):
    import keras  # noqa: F401 - the adapter needs Keras; the backend does not matter here
    import pyarrow as pa
    import pyarrow.parquet as pq

    import streamfeed as sf

    pq.write_table(
        pa.table({"id": np.arange(8), "x": np.ones(8), "label": np.zeros(8, dtype=np.int64)}), tmp_path / "t.parquet"
    )
    ds = sf.read_parquet(tmp_path / "t.parquet").batch(4)
    with pytest.raises(ArgumentError, match="ids="):
        sf.keras.DataQualityMonitor(ds.to_keras(label="label"))
    with pytest.raises(ArgumentError, match="streamfeed Keras dataset"):
        sf.keras.DataQualityMonitor(ds)
    with pytest.raises(ArgumentError, match="every="):
        sf.keras.DataQualityMonitor(ds.to_keras(label="label", ids="id"), every=0)


def test_margins_are_the_given_labels_lead_for_logits_probabilities_and_binary():
    logits = np.array([[2.0, 0.5, -1.0], [0.0, 3.0, 1.0]])
    margin, loss = margins_and_losses(logits, np.array([0, 2]))
    assert margin.tolist() == [1.5, -2.0]
    assert loss == pytest.approx(np.log(np.exp(logits).sum(axis=1)) - np.array([2.0, 1.0]))
    probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    margin_p, loss_p = margins_and_losses(probabilities, np.array([[1, 0, 0], [0, 0, 1]]))  # one-hot labels
    assert np.sign(margin_p).tolist() == [1.0, -1.0] and loss_p == pytest.approx(loss)
    margin_b, _ = margins_and_losses(np.array([[0.9], [0.9]]), np.array([1, 0]))  # a sigmoid output
    assert margin_b == pytest.approx([np.log(9.0), -np.log(9.0)])
    with pytest.raises(ArgumentError, match="not a class"):
        margins_and_losses(logits, np.array([0, 3]))


def test_a_bounded_ledger_keeps_the_same_uniform_sample_every_epoch():
    ledger = MarginLedger(max_rows=1000)
    ids = np.arange(10_000)
    margins = np.where(ids % 10 == 0, -1.0, 1.0)  # every tenth row "mislabelled"
    for _ in range(3):  # three epochs, in another order each time
        ledger.begin_epoch()
        order = np.random.default_rng(_).permutation(ids)
        for batch in np.array_split(order, 40):
            ledger.add(batch, np.zeros(len(batch)), margins[batch], np.zeros(len(batch)))
    assert 500 <= len(ledger) <= 1000
    tracked = np.array(list(ledger.ids()))
    assert ledger.sampled_share == pytest.approx(len(tracked) / len(ids), rel=0.15)
    assert all(row["times_trained"] == 3 for row in ledger.suspects())  # a row stays in (or out) in every epoch
    assert ledger.noise_rate() == pytest.approx(np.mean(tracked % 10 == 0))
    assert abs(ledger.noise_rate() - 0.1) < 0.03


def test_string_ids_and_the_report_order(tmp_path):
    ledger = MarginLedger()
    ledger.add(np.array(["a", "b", "c"], dtype=object), np.array([0, 1, 1]), np.array([0.5, -2.0, -0.1]), np.ones(3))
    ledger.begin_epoch()
    ledger.add(np.array(["b"], dtype=object), np.array([1]), np.array([-1.0]), np.ones(1))
    rows = ledger.suspects()
    assert [(row["id"], row["rank"], row["times_trained"]) for row in rows] == [("b", 1, 2), ("c", 2, 1)]
    assert rows[0]["mean_margin"] == pytest.approx(-1.5) and rows[0]["last_margin"] == -1.0
    assert ledger.noise_rate() == pytest.approx(2 / 3)


def test_padded_rows_are_not_measured_and_one_batch_end_covers_the_batches_before_it(tmp_path):
    import keras
    import pyarrow as pa
    import pyarrow.parquet as pq

    import streamfeed as sf

    ids = np.arange(10)
    table = {"id": ids, "x": ids.astype("float32"), "label": ids % 3}
    pq.write_table(pa.table(table), tmp_path / "t.parquet")
    train = sf.read_parquet(tmp_path / "t.parquet").batch(4, last_batch="pad").to_keras(label="label", ids="id")
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(3)])
    monitor = sf.keras.DataQualityMonitor(train)
    monitor.set_model(model)
    monitor.on_train_begin()  # batches are kept only while fit trains
    with train:
        train.on_epoch_begin()
        served = [train[i] for i in range(len(train))]
        assert len(served) == 3 and float(np.sum(served[-1][2])) == 2.0  # the last batch: 2 rows and 2 padding
        monitor.on_train_batch_end(1)  # as with steps_per_execution=2: batches 0 and 1
        assert len(monitor.ledger) == 8
        monitor.on_train_batch_end(2)
        train.on_epoch_end()
    assert sorted(monitor.ledger.ids()) == ids.tolist()
    assert [row["times_trained"] for row in monitor.ledger.suspects(top=10)] == [1] * 10


# ------------------------------------------------------------ refused input (issue 22, item 13)
def test_nan_outputs_are_refused_not_counted_as_clean_rows():
    # A diverged model: before, NaN margins compared False with the threshold and the estimate read 0.0 %.
    with pytest.raises(ArgumentError, match="NaN or infinite"):
        margins_and_losses(np.array([[np.nan, 1.0], [0.5, 0.2]]), np.array([0, 1]))
    with pytest.raises(ArgumentError, match="NaN or infinite"):
        margins_and_losses(np.array([[np.nan], [0.3]]), np.array([0, 1]))  # a binary model


def test_float_labels_that_are_not_class_ids_are_refused_not_truncated():
    logits = np.array([[2.0, 0.5, -1.0], [0.0, 3.0, 1.0]])
    with pytest.raises(ArgumentError, match="not class ids"):
        margins_and_losses(logits, np.array([0.0, 1.7]))  # before: 1.7 was taken as class 1
    with pytest.raises(ArgumentError, match="not class ids"):
        margins_and_losses(logits, np.array([0.0, np.nan]))
    margin, _ = margins_and_losses(logits, np.array([0.0, 2.0]))  # whole-number floats are class ids
    assert margin.tolist() == [1.5, -2.0]


def test_a_label_outside_a_binary_model_is_refused_not_taken_as_class_0():
    with pytest.raises(ArgumentError, match="not a class"):
        margins_and_losses(np.array([[0.9], [0.2]]), np.array([1, 2]))  # before: 2 was read as class 0


def test_nan_ids_are_refused_they_would_be_a_new_row_every_epoch():
    ledger = MarginLedger()
    with pytest.raises(ArgumentError, match="NaN"):
        ledger.add(np.array([1.0, np.nan]), np.array([0, 1]), np.array([0.5, -1.0]), np.ones(2))
    with pytest.raises(ArgumentError, match="NaN"):
        ledger.add(np.array(["a", float("nan")], dtype=object), np.array([0, 1]), np.ones(2), np.ones(2))
    assert len(ledger) == 0  # nothing half-added


def test_colliding_ids_in_one_epoch_are_refused_not_merged():
    ledger = MarginLedger()
    ledger.add(np.array([1, 2]), np.array([0, 1]), np.array([0.5, -1.0]), np.ones(2))
    with pytest.raises(ArgumentError, match="not unique"):
        ledger.add(np.array([3, 2]), np.array([0, 0]), np.array([0.5, 0.5]), np.ones(2))  # id 2 again, same epoch
    with pytest.raises(ArgumentError, match="not unique"):
        MarginLedger().add(np.array([7, 7]), np.array([0, 1]), np.ones(2), np.ones(2))  # twice in one batch
    assert [row["times_trained"] for row in ledger.suspects(top=5)] == [1, 1]  # the refused batch left no trace
    ledger.begin_epoch()
    ledger.add(np.array([3, 2]), np.array([0, 1]), np.array([0.5, 0.5]), np.ones(2))  # a new epoch: id 2 again is fine
    assert sorted(ledger.ids()) == [1, 2, 3]


def test_batches_served_to_evaluate_and_predict_are_not_kept(tmp_path):
    import keras
    import pyarrow as pa
    import pyarrow.parquet as pq

    import streamfeed as sf

    ids = np.arange(64)
    pq.write_table(pa.table({"id": ids, "x": ids.astype("float32"), "label": ids % 2}), tmp_path / "t.parquet")
    train = sf.read_parquet(tmp_path / "t.parquet").batch(8).to_keras(label="label", ids="id")
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    monitor = sf.keras.DataQualityMonitor(train)
    model.fit(train, epochs=1, callbacks=[monitor], verbose=0)
    assert len(monitor.ledger) == 64 and not monitor._kept
    model.evaluate(train, verbose=0)  # before: its 8 batches were kept (up to 256: +111 MiB over a 64 MiB limit)
    model.predict(train, verbose=0)
    assert not monitor._kept


def test_the_estimate_does_not_depend_on_how_long_the_model_trained():
    """Warm-up margins (every row misranked in the first epochs) do not count: only the last epochs' margins do.

    A mean over all epochs (the AUM) read 100 % here after 6 epochs and 10 % after 20; the share of rows
    misranked in each of their last three measurements reads the flipped share at both.
    """
    ids = np.arange(200)
    flipped = ids % 10 == 0
    readings = {}
    ledger = MarginLedger()
    for epoch in range(1, 21):
        ledger.begin_epoch()
        warm = epoch <= 3
        margins = np.where(flipped | warm, -1.0, 0.5)
        margins[(ids % 10 == 5) & (epoch % 2 == 0)] = -0.2  # a clean row the model still gets wrong every other epoch
        ledger.add(ids, np.zeros(len(ids)), margins, np.zeros(len(ids)))
        readings[epoch] = ledger.noise_rate()
    assert readings[6] == readings[20] == pytest.approx(0.1)
    assert readings[2] == 1.0  # before the model has fit anything, every row is misranked in all its measurements
    assert {row["id"] for row in ledger.suspects()} == set(ids[flipped].tolist())  # the rows the estimate counts
