"""Runs ``fit`` with an InputStallMonitor on the backend named by ``KERAS_BACKEND``.

    KERAS_BACKEND=jax python _monitor_driver.py '<json args>'

args: ``path`` (a Parquet file, written if missing) and ``delay`` (seconds a
per-batch ``map`` sleeps: the injected input stall). Every step also
sleeps a few milliseconds in a callback (the model's compute), so the
no-delay run has something for the data to wait on. Prints one line
``RESULT {json}`` with the monitor's per-epoch numbers, the History keys it
added and the warnings it logged.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time

import numpy as np

ROWS, ROW_GROUP, BATCH, EPOCHS = 1600, 200, 64, 2
STEP_SECONDS = 0.005


def write(path: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if os.path.exists(path):
        return
    rng = np.random.default_rng(0)
    x = rng.normal(size=(ROWS, 2)).astype("float32")
    tmp = f"{path}.{os.getpid()}.tmp"
    pq.write_table(pa.table({"f0": x[:, 0], "f1": x[:, 1], "y": x.sum(axis=1)}), tmp, row_group_size=ROW_GROUP)
    os.replace(tmp, path)


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((record.levelname, record.getMessage()))


def main(args: dict) -> dict:
    import keras

    import streamfeed as sf
    from streamfeed.keras.monitor import InputStallMonitor

    write(args["path"])
    handler = Collect()
    logger = logging.getLogger("streamfeed")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)

    def stall(columns):
        time.sleep(args["delay"])
        return columns

    dataset = sf.read_parquet(args["path"]).shuffle(seed=0).batch(BATCH)
    if args["delay"]:
        dataset = dataset.map(stall, name="stall")

    class Step(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            time.sleep(STEP_SECONDS)

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(4), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    train = dataset.to_keras(label="y")
    monitor = InputStallMonitor(train, warn_above=0.3)
    with train:
        history = model.fit(train, epochs=EPOCHS, verbose=0, callbacks=[monitor, Step()])
    return {
        "backend": keras.backend.backend(),
        "epochs": monitor.history,
        "history_keys": sorted(history.history),
        "history_share": history.history.get("input_wait_share"),
        "warnings": [message for level, message in handler.records if level == "WARNING"],
        "infos": [message for level, message in handler.records if level == "INFO" and "input wait" in message],
    }


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(json.loads(sys.argv[1]))), flush=True)
