"""One real Keras fit of a tiny CNN from read_images on a zip archive, on the backend named by ``KERAS_BACKEND``.

    KERAS_BACKEND=jax python _fit_driver.py <archive.zip>

Prints one line ``RESULT {json}``: the losses, the steps an epoch, the accuracy, and the paths one epoch served.
"""

from __future__ import annotations

import json
import sys

import keras

import streamfeed as sf


def main(archive: str) -> None:
    dataset = sf.read_images(archive, size=(12, 12), dtype="float32", fragment_size=10).shuffle(4, window=2).batch(16)
    train = dataset.to_keras(features=["image"], label="label")
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((12, 12, 3)),
            keras.layers.Conv2D(4, 3, activation="tanh"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(2),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(0.02),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    history = model.fit(train, epochs=6, verbose=0)
    with dataset.iter_epoch(0) as iterator:
        paths = sorted(str(p) for batch in iterator for p in batch["path"])
    result = {"loss": history.history["loss"], "accuracy": history.history["accuracy"], "steps": len(train)}
    print("RESULT " + json.dumps({**result, "paths": paths}))


if __name__ == "__main__":
    main(sys.argv[1])
