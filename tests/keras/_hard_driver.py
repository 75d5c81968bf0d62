"""Trains with hard-example sampling on the backend named by ``KERAS_BACKEND``; one mode per process.

    KERAS_BACKEND=jax python _hard_driver.py '{"dir": "/tmp/x", "mode": "full"}'

The data: 1200 rows of three separable classes, ids 0..1199; the 120 rows
with ``id % 10 == 0`` have a flipped label, so their loss stays high: the
hard minority. ``hard_examples(ids="id", floor=0.3)`` draws 1200 rows an
epoch; ``HardExampleMiner`` scores them.

Modes:
    full    three epochs uninterrupted.
    crash   the same, with ``DataCheckpoint(every=5)`` placed *before* the
            miner in the callbacks (so a save comes before the miner's own
            measurement of the batch), killed with ``os._exit`` after 12
            batches of epoch 1.
    resume  a new process continuing from that checkpoint to the end.

Prints ``RESULT {json}``: the ids served per epoch, the final weights, the
final score table and the sampling report.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

ROWS, GROUP, BATCH, EPOCHS = 1200, 100, 48, 3
CRASH_EPOCH, CRASH_AFTER, EVERY = 1, 12, 5


def write(path: Path) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        rng = np.random.default_rng(0)
        labels = np.arange(ROWS) % 3
        centres = np.array([[0.0, 3.0], [3.0, -1.5], [-3.0, -1.5]], dtype="float32")
        x = (centres[labels] + rng.normal(size=(ROWS, 2))).astype("float32")
        given = np.where(np.arange(ROWS) % 10 == 0, (labels + 1) % 3, labels)
        table = pa.table({"id": np.arange(ROWS, dtype="int64"), "x0": x[:, 0], "x1": x[:, 1], "y": given})
        pq.write_table(table, path, row_group_size=GROUP)
    return str(path)


def main() -> None:
    args = json.loads(sys.argv[1])
    import keras

    import streamfeed as sf
    from streamfeed.keras import DataCheckpoint, HardExampleMiner

    folder, mode = Path(args["dir"]), args["mode"]
    data = sf.read_parquet(write(folder / "data.parquet"))
    hard = data.shuffle(seed=3, window=4).hard_examples("id", floor=0.3)
    train = hard.batch(BATCH).to_keras(features=["x0", "x1"], label="y", ids="id")

    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input(shape=(2,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3)]
    )
    model.compile(
        optimizer=keras.optimizers.SGD(0.05), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    served: dict[str, list] = {}

    class Record(keras.callbacks.Callback):
        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            served[str(epoch)] = train.served_ids().astype("int64").tolist()

    miner = HardExampleMiner(train)
    callbacks: list = [miner, Record()]
    initial_epoch = 0
    if mode in ("crash", "resume"):
        checkpoint = DataCheckpoint(train, folder / "ckpt", every=EVERY)
        initial_epoch = checkpoint.initial_epoch
        callbacks = [checkpoint, miner, Record()]

    def report() -> dict:
        scores = hard.sampler.scores.state(train.epoch)
        return {
            "backend": keras.backend.backend(),
            "initial_epoch": initial_epoch,
            "started_early": train.epochs_started_early,
            "served": served,
            "weights": [np.asarray(w, dtype="float64").ravel().tolist() for w in model.get_weights()],
            "table": scores["table"],
            "report": {k: v for k, v in train.dataset.sampling_report().items() if k != "loss_quantiles"},
        }

    if mode == "crash":

        class Crash(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
                self.epoch = epoch

            def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
                if self.epoch == CRASH_EPOCH and batch + 1 == CRASH_AFTER:
                    print("RESULT " + json.dumps(report()), flush=True)
                    os._exit(17)  # no cleanup, no callbacks: like a killed job

        callbacks.append(Crash())
    model.fit(train, epochs=EPOCHS, initial_epoch=initial_epoch, callbacks=callbacks, verbose=0)
    train.close()
    print("RESULT " + json.dumps(report()), flush=True)


if __name__ == "__main__":
    main()
