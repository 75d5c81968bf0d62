"""One real Keras fit from read_sql, on the backend named by ``KERAS_BACKEND`` (Keras fixes it at import).

    KERAS_BACKEND=jax python _fit_driver.py <connection> <table>

Prints one line ``RESULT {json}``: the batches each epoch served, the losses, and the ids seen.
"""

from __future__ import annotations

import json
import sys

import keras
import numpy as np

import streamfeed as sf


def main(connection: str, table: str) -> None:
    dataset = sf.read_sql(connection, table=table, key="id", fragment_rows=70).shuffle(3, window=2).batch(32)
    train = dataset.to_keras(features=["f0", "f1"], label="y")
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    history = model.fit(train, epochs=3, verbose=0)
    with dataset.iter_epoch(0) as iterator:
        ids = sorted(int(i) for batch in iterator for i in batch["id"])
    weights = np.asarray(model.layers[0].get_weights()[0]).ravel().tolist()
    print("RESULT " + json.dumps({"loss": history.history["loss"], "steps": len(train), "ids": ids, "w": weights}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
