"""Trains on a mixture of two Parquet datasets on the backend named by ``KERAS_BACKEND``.

    KERAS_BACKEND=jax python _mix_driver.py '{"dir": "/tmp/x"}'

Two components (``a``: ids 0.., ``b``: ids 10 000..) mixed under a weights
schedule (1:1 in epoch 0, 3:1 in epoch 1), 300 rows an epoch, the source
column a feature of the model. One ``fit`` of two epochs records the ids
served per epoch and the data state after four trained batches of epoch 1;
a second adapter restores that state and fits the rest of epoch 1. Prints
``RESULT {json}`` with what it saw.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

BATCH, SAMPLES = 32, 300


def write(path: Path, rows: int, base: int, shift: float) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(base)
    x = rng.normal(size=(rows, 2)).astype("float32") + shift
    y = (x @ np.array([1.0, -1.0], dtype="float32") + shift).astype("float32")
    table = pa.table({"id": np.arange(base, base + rows, dtype="int64"), "x0": x[:, 0], "x1": x[:, 1], "y": y})
    pq.write_table(table, path, row_group_size=50)
    return str(path)


def main() -> None:
    args = json.loads(sys.argv[1])
    import keras

    import streamfeed as sf

    folder = Path(args["dir"])
    a = sf.read_parquet(write(folder / "a.parquet", 400, 0, 0.0)).shuffle(seed=1)
    b = sf.read_parquet(write(folder / "b.parquet", 200, 10_000, 2.0)).shuffle(seed=2)

    def schedule(epoch: int) -> dict:
        return {"a": 1.0, "b": 1.0} if epoch == 0 else {"a": 3.0, "b": 1.0}

    mixed = sf.mix({"a": a, "b": b}, weights=schedule, samples_per_epoch=SAMPLES, seed=5, source_column="source")
    mixed = mixed.batch(BATCH)

    def model() -> keras.Model:
        net = keras.Sequential(
            [keras.Input(shape=(3,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)]
        )
        net.compile(optimizer="adam", loss="mse")
        return net

    features = ["x0", "x1", "source"]
    train = mixed.to_keras(features=features, label="y", ids="id")
    seen: dict = {"ids": [], "state": None}

    class Record(keras.callbacks.Callback):
        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            if train.epoch == 1 and batch == 3:
                seen["state"] = train.get_state(trained=4)

        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            seen["ids"].append(train.served_ids().astype("int64").tolist())

    history = model().fit(train, epochs=2, callbacks=[Record()], verbose=0)
    train.close()
    resumed = mixed.to_keras(features=features, label="y", ids="id")
    resumed.set_state(seen["state"])
    batches = len(resumed)
    model().fit(resumed, epochs=1, verbose=0)
    rest = resumed.served_ids().astype("int64").tolist()
    resumed.close()
    print(
        "RESULT "
        + json.dumps(
            {
                "backend": keras.backend.backend(),
                "loss": [float(v) for v in history.history["loss"]],
                "epoch_ids": seen["ids"],
                "state_weights": seen["state"]["weights"],
                "resumed_batches": batches,
                "resumed_ids": rest,
            }
        )
    )


if __name__ == "__main__":
    main()
