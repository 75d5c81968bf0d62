"""Trains on augmented images (``random_map``) on the backend named by ``KERAS_BACKEND``.

    KERAS_BACKEND=jax python _augment_driver.py '{"root": "/tmp/images"}'

The image folder is written by the test (PIL PNGs, two classes). The
pipeline crops, flips, rotates and recolours each image in the read
threads, keyed on (seed, epoch, row); a real ``fit`` of two epochs trains
a fixed linear projection of the pixels with a learning rate of 0, so each
batch's loss is a function of the inputs ``fit`` was given. Prints
``RESULT {json}``: the rows and per-batch losses ``fit`` saw, and for each
epoch the SHA-256 of every augmented batch and the loss of its first batch
computed in NumPy from the pipeline iterated directly.
"""

from __future__ import annotations

import hashlib
import json
import sys

import numpy as np

SIZE, BATCH, SEED = 12, 8, 2


def pipeline(root: str):
    import streamfeed as sf
    from streamfeed.transforms import (
        compose,
        random_brightness_contrast,
        random_flip,
        random_resized_crop,
        random_rotation,
    )

    augment = compose(
        random_resized_crop((SIZE, SIZE), scale=(0.5, 1.0)),
        random_flip(),
        random_rotation(10.0),
        random_brightness_contrast(),
    )

    def with_row(chunk: dict, rng) -> dict:
        return {**augment(chunk, rng), "row": rng.rows}

    ds = sf.read_images(root, size=(16, 16), fragment_size=8).with_options(read_threads=3)
    return ds.random_map(with_row, seed=SEED, name="augment").shuffle(3, window=2).batch(BATCH)


def projection() -> np.ndarray:
    return np.random.default_rng(0).normal(size=(SIZE * SIZE * 3, 1)).astype("float32") / 100.0


def reference(ds, epoch: int) -> dict:
    """What the pipeline serves in ``epoch``, iterated directly: each batch's hash, the first batch's loss."""
    hashes, first_loss = [], None
    with ds.iter_epoch(epoch) as stream:
        for batch in stream:
            image = np.ascontiguousarray(batch["image"])
            hashes.append(hashlib.sha256(image.tobytes() + batch["row"].astype("int64").tobytes()).hexdigest())
            if first_loss is None:
                pred = (image.astype("float32") / 255.0).reshape(len(image), -1) @ projection()
                first_loss = float(np.mean((pred[:, 0] - batch["label"].astype("float32")) ** 2))
    return {"hashes": hashes, "first_loss": first_loss}


def main() -> None:
    args = json.loads(sys.argv[1])
    import keras

    ds = pipeline(args["root"])
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((SIZE, SIZE, 3)),
            keras.layers.Rescaling(1 / 255),
            keras.layers.Flatten(),
            keras.layers.Dense(1, use_bias=False, kernel_initializer=keras.initializers.Constant(projection())),
        ]
    )
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.0), loss="mse")
    train = ds.to_keras(features=["image"], label="label", ids="row", model=model)
    seen: dict = {"losses": [], "rows": []}

    class Record(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
            seen["losses"].append([])

        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            seen["losses"][-1].append(float(logs["loss"]))

        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            seen["rows"].append(train.served_ids().astype("int64").tolist())

    model.fit(train, epochs=2, callbacks=[Record()], verbose=0)
    train.close()
    result = {
        "backend": keras.backend.backend(),
        "fit_losses": seen["losses"],
        "fit_rows": seen["rows"],
        "reference": [reference(ds, epoch) for epoch in range(2)],
    }
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
