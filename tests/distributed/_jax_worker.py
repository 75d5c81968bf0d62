"""One process of a multi-process JAX job on loopback (gloo collectives), run by test_jax_multiprocess.py.

argv: process_id, process_count, coordinator port, JSON settings. Each process
reads its shard of the same Parquet files, trains with Keras's
``DataParallel(auto_shard_dataset=False)`` and writes what it saw as JSON to
``settings["out"]``: the ids it served per epoch, steps, final weights. With
``crash_after`` it saves the data state (``KerasDataset.get_state(trained)``)
and the weights after that many steps of epoch 0 and exits hard, as a killed
worker does; with ``resume`` it restores them first.
"""

from __future__ import annotations

import json
import os
import sys
import time

os.environ["KERAS_BACKEND"] = "jax"
import jax

jax.config.update("jax_cpu_collectives_implementation", "gloo")
index, count, port, settings = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])
jax.distributed.initialize(
    coordinator_address=f"127.0.0.1:{port}",
    num_processes=count,
    process_id=index,
    heartbeat_timeout_seconds=settings.get("heartbeat", 100),
    shutdown_timeout_seconds=settings.get("shutdown", 300),
)

import keras  # noqa: E402
import numpy as np  # noqa: E402

import streamfeed as sf  # noqa: E402

CRASH_CODE = 17


def with_class(chunk: dict) -> dict:
    flipped = chunk["id"] % 10 == 0
    return {**chunk, "cls": ((chunk["y"] > 0) ^ flipped).astype("int64")}


with_class.new_columns = ("cls",)  # type: ignore[attr-defined]


def main() -> None:
    keras.distribution.set_distribution(keras.distribution.DataParallel(auto_shard_dataset=False))
    dataset = sf.read_parquet(settings["files"])
    dataset = dataset.shuffle(seed=settings.get("seed", 7)) if settings.get("shuffle", True) else dataset
    hard = settings.get("hard")
    if hard:  # a class label (y > 0, flipped on every tenth row: the hard ones) and hard-example sampling
        dataset = dataset.map(with_class, name="cls").hard_examples("id", samples_per_epoch=hard)
    dataset = dataset.batch(settings["global_batch"] // count).shard(index, count, lanes=settings.get("lanes"))
    train = dataset.to_keras(features=["a", "b"], label="cls" if hard else "y", ids="id")
    keras.utils.set_random_seed(0)
    if hard:
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(2)])
        model.compile(keras.optimizers.SGD(0.05), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    else:
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        model.compile(keras.optimizers.SGD(0.05), "mse")
    out: dict = {"steps": [], "ids": [], "seconds": [], "index": index}
    if settings.get("resume"):
        saved = json.loads(open(settings["resume"]).read())
        model.set_weights([np.asarray(w, "float32") for w in saved["weights"]])
        train.set_state(saved["state"])

    class Record(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.steps, self.started = 0, time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            self.steps = batch + 1
            if settings.get("crash_after") == self.steps and "save" not in settings:
                os._exit(CRASH_CODE)  # a killed worker: only what a DataCheckpoint saved survives
            if settings.get("crash_after") == self.steps:
                state = train.get_state(trained=self.steps)
                model.jax_state_sync()  # under fit, JAX keeps the trained variables apart until asked
                weights = [w.tolist() for w in model.get_weights()]
                path = settings["save"] + f".{index}"
                with open(path, "w") as f:
                    json.dump({"state": state, "weights": weights, "ids": train.served_ids().tolist()}, f)
                os._exit(CRASH_CODE)

        def on_epoch_end(self, epoch, logs=None):
            out["seconds"].append(time.perf_counter() - self.started)  # for benchmarks/scale.py --jax
            out["steps"].append(self.steps)
            out["ids"].append(train.served_ids().tolist())

    callbacks: list = [Record()]
    if hard:
        miner = sf.keras.HardExampleMiner(train)
        callbacks.insert(0, miner)
    initial_epoch = 0
    if settings.get("checkpoint"):
        checkpoint = sf.keras.DataCheckpoint(train, settings["checkpoint"], every=settings.get("every"))
        callbacks.append(checkpoint)
        initial_epoch = checkpoint.initial_epoch
    epochs = settings.get("epochs", 1)
    model.fit(train, epochs=epochs, initial_epoch=initial_epoch, verbose=0, callbacks=callbacks)
    out["weights"] = [w.tolist() for w in model.get_weights()]
    if hard:
        table = train.dataset.sampler.scores.state(train.epoch)["table"]
        out["table"] = {"epoch": table["epoch"], "hashes": table["hashes"], "losses": table["losses"]}
    with open(settings["out"] + f".{index}", "w") as f:
        json.dump(out, f)


try:
    main()
except sf.StreamfeedError as error:
    with open(settings["out"] + f".{index}", "w") as f:
        json.dump({"error": type(error).__name__, "message": str(error)}, f)
    sys.exit(3)
