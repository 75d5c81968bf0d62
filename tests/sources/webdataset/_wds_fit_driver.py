"""One real Keras fit from read_webdataset, on the backend named by ``KERAS_BACKEND`` (Keras fixes it at import).

    KERAS_BACKEND=jax python _wds_fit_driver.py <shard directory>

Prints one line ``RESULT {json}``: the steps, the losses, the final accuracy and the keys an epoch served.
"""

from __future__ import annotations

import json
import sys

import keras

import streamfeed as sf


def main(root: str) -> None:
    dataset = sf.read_webdataset(root, keys=["png", "cls"], fragment_samples=16).shuffle(seed=2).batch(16)
    train = dataset.to_keras(features=["png"], label="cls")
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((8, 8, 3)),
            keras.layers.Rescaling(1 / 255),
            keras.layers.GlobalAveragePooling2D(),  # the mean brightness per channel tells the classes apart
            keras.layers.Dense(2, activation="softmax"),
        ]
    )
    model.compile(optimizer=keras.optimizers.Adam(0.1), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    history = model.fit(train, epochs=8, verbose=0)
    with sf.read_webdataset(root, fragment_samples=16).shuffle(seed=2).batch(16).iter_epoch(0) as stream:
        keys = sorted(str(key) for batch in stream for key in batch["__key__"])
    result = {"loss": history.history["loss"], "accuracy": history.history["accuracy"][-1], "steps": len(train)}
    print("RESULT " + json.dumps({**result, "keys": keys}))


if __name__ == "__main__":
    main(sys.argv[1])
