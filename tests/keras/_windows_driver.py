"""A small forecaster fit on windows over a stream, on the backend named by ``KERAS_BACKEND``.

    KERAS_BACKEND=jax python _windows_driver.py <parquet directory>

Prints one line ``RESULT {json}``: the losses per epoch, the steps Keras was
told, the batches it was served, and the validation loss.
"""

from __future__ import annotations

import json
import sys

import keras
import numpy as np

import streamfeed as sf

LENGTH = 16


def main(directory: str) -> None:
    windows = sf.read_parquet(directory).windows(LENGTH, stride=2, targets={"next": "price"}, by="ticker")
    train = windows.shuffle(3, window=4).batch(32).to_keras(features=["price"], label="next")
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((LENGTH,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    served = []

    class Count(keras.callbacks.Callback):
        def on_train_batch_end(self, batch: int, logs: object = None) -> None:
            served.append(batch)

    history = model.fit(train, epochs=4, verbose=0, callbacks=[Count()])
    evaluation = windows.batch(64).to_keras(features=["price"], label="next")
    loss = model.evaluate(evaluation, verbose=0)
    print(
        "RESULT "
        + json.dumps(
            {
                "loss": history.history["loss"],
                "steps": len(train),
                "served": len(served),
                "windows": windows.num_rows(0),
                "evaluate": float(np.asarray(loss)),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1])
