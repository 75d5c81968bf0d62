"""One worker of a TensorFlow MultiWorkerMirroredStrategy job on loopback, run by test_tf_multiworker.py.

argv: worker index, worker count, JSON settings (``ports``: one per worker).
Each worker reads its shard of the same Parquet files through
:class:`streamfeed.keras.tf_distributed.WorkerFeed` and trains a tiny model
with the custom step (``mode="loop"``), or calls ``model.fit`` on
``to_keras`` (``mode="fit"``, the upstream bug's probe). It writes what it
saw as JSON to ``settings["out"] + ".<index>"``: the ids it served per epoch,
steps, the final weights. With ``checkpoint`` it saves every ``every`` steps
into that directory (and restores from it when it holds a checkpoint); with
``crash_after`` it exits hard right after the save at that step of epoch 0,
as a killed worker does.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

index, count, settings = int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
os.environ["KERAS_BACKEND"] = "tensorflow"
os.environ["TF_CONFIG"] = json.dumps(
    {
        "cluster": {"worker": [f"127.0.0.1:{port}" for port in settings["ports"][:count]]},
        "task": {"type": "worker", "index": index},
    }
)
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

import streamfeed as sf  # noqa: E402
from streamfeed.keras.tf_distributed import WorkerCheckpoint, WorkerFeed, train_step  # noqa: E402

CRASH_CODE = 17
ERROR_CODE = 3
UPSTREAM_CODE = 4


def write(result: dict) -> None:
    with open(settings["out"] + f".{index}", "w") as f:
        json.dump(result, f)


def make_model(strategy: tf.distribute.Strategy) -> keras.Model:
    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(4, activation="tanh"), keras.layers.Dense(1)])
        model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    return model


def data() -> sf.Dataset:
    dataset = sf.read_parquet(settings["files"]).shuffle(seed=settings.get("seed", 7))
    return dataset.batch(settings["global_batch"] // count)


def loop(strategy: tf.distribute.Strategy) -> dict:
    model = make_model(strategy)
    feed = WorkerFeed(strategy, data(), lanes=settings.get("lanes"), features=["a", "b"], label="y", ids="id")
    step = train_step(strategy, model, keras.losses.MeanSquaredError(reduction=None))
    out: dict = {"steps": [], "ids": [], "losses": []}
    checkpoint = WorkerCheckpoint(feed, model, settings["checkpoint"]) if settings.get("checkpoint") else None
    first = checkpoint.initial_epoch if checkpoint else 0
    out["start"] = feed.get_state(0)
    every, crash_after = settings.get("every"), settings.get("crash_after")
    for _ in range(first, settings.get("epochs", 1)):
        rows = 0
        for trained, batch in feed.epoch():
            out["losses"].append(float(step(batch)))
            rows += sum(int(part[0].shape[0]) for part in strategy.experimental_local_results(batch))
            if checkpoint and every and (trained % every == 0 or trained == feed.steps):
                checkpoint.save(trained)
            if crash_after == trained:
                out["ids"].append(feed.keras.served_ids()[:rows].tolist())  # served may run ahead of trained
                out["steps"].append(trained)
                write(out)
                os._exit(CRASH_CODE)  # a killed worker: only what the checkpoint saved survives
        out["steps"].append(trained)
        out["ids"].append(feed.keras.served_ids().tolist())
    out["weights"] = [w.tolist() for w in model.get_weights()]
    feed.close()
    return out


def fit(strategy: tf.distribute.Strategy) -> dict:
    model = make_model(strategy)
    shard = data().shard(index, count)
    with shard.to_keras(features=["a", "b"], label="y") as train:
        try:
            model.fit(train, epochs=1, verbose=0)
        except ValueError as error:
            if "Attempt to convert a value (PerReplica" in str(error):
                write({"upstream": str(error)[:500]})
                sys.exit(UPSTREAM_CODE)
            raise
    return {"weights": [w.tolist() for w in model.get_weights()]}


try:
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    write((fit if settings.get("mode") == "fit" else loop)(strategy))
except sf.StreamfeedError as error:
    write({"error": type(error).__name__, "message": str(error)})
    sys.exit(ERROR_CODE)
except Exception as error:  # noqa: BLE001 - reported to the test, which fails naming it
    write({"error": type(error).__name__, "message": str(error)[-3000:], "traceback": traceback.format_exc()[-3000:]})
    sys.exit(1)
