"""One run of the mid-epoch resume test of issue 24's pipelines, on the backend named by ``KERAS_BACKEND``.

    KERAS_BACKEND=jax python _sequence_resume_driver.py '{"kinds": ["padded"], "mode": "full", ...}'

``kinds``, each of: ``padded`` (token lists padded to 12 with a mask, Embedding with
``mask_zero`` + GRU), ``bucketed`` (the same lists bucketed by length into
three shapes), ``windows`` (windows of 8 over two series, a dense
forecaster) or ``augmented`` (images cropped, flipped, rotated and
recoloured per row in the read threads, a small CNN). ``mode``: ``full``
(two epochs uninterrupted), ``crash`` (``DataCheckpoint(every=1)``, killed
with ``os._exit(17)`` after the third batch of epoch 1) or ``resume`` (a new
process continuing from that checkpoint). Prints ``RESULT {json}``: per
kind, the optimizer's step count, the steps per epoch and the final weights.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

CRASH = 17


def pipeline(kind: str, data: Path):
    import streamfeed as sf

    if kind == "padded":
        ds = sf.read_parquet(data / "tokens.parquet").shuffle(5, window=2)
        return ds.batch(8, pad=sf.Pad(length=12, truncate="end", mark="none")), {"features": ["tok"], "label": "y"}
    if kind == "bucketed":
        ds = sf.read_parquet(data / "tokens.parquet").shuffle(5, window=2)
        bucketed = ds.batch(bucket=sf.Bucket("tok", (4, 8, 12), (12, 8, 4)), last_batch="pad")
        return bucketed, {"features": ["tok"], "label": "y"}
    if kind == "windows":
        ds = sf.read_parquet(data / "series.parquet").windows(8, targets={"next": "price"}, by="ticker")
        return ds.shuffle(3, window=2).batch(16), {"features": ["price"], "label": "next"}
    from streamfeed.transforms import (
        compose,
        random_brightness_contrast,
        random_flip,
        random_resized_crop,
        random_rotation,
    )

    augment = compose(
        random_resized_crop((12, 12), scale=(0.5, 1.0)),
        random_flip(),
        random_rotation(10.0),
        random_brightness_contrast(),
    )
    ds = sf.read_images(str(data / "images"), size=(16, 16), fragment_size=8).with_options(read_threads=3)
    return ds.random_map(augment, seed=2, name="augment").shuffle(3, window=2).batch(8), {
        "features": ["image"],
        "label": "label",
    }


def model_for(kind: str):
    import keras

    keras.utils.set_random_seed(0)
    if kind in ("padded", "bucketed"):
        layers = [
            keras.Input((None,), dtype="int32"),
            keras.layers.Embedding(100, 8, mask_zero=True),
            keras.layers.GRU(8),
            keras.layers.Dense(1),
        ]
    elif kind == "windows":
        layers = [keras.Input((8,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)]
    else:
        layers = [
            keras.Input((12, 12, 3)),
            keras.layers.Rescaling(1 / 255),
            keras.layers.Conv2D(4, 3, activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(5),  # the five class folders of factories.images
        ]
    model = keras.Sequential(layers)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True) if kind == "augmented" else "mse"
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss=loss)
    return model


def run(kind: str, mode: str, data: Path, directory: str) -> dict:
    """One ``kind``'s fit in ``mode``; its result (a crash never returns)."""
    import keras

    from streamfeed.keras import DataCheckpoint

    ds, names = pipeline(kind, data)
    dtype = "int32" if kind in ("padded", "bucketed") else "float32"
    train = ds.to_keras(features=names["features"], label=names["label"], dtype=dtype)
    model = model_for(kind)

    class Crash(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
            self.epoch = epoch

        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            if mode == "crash" and self.epoch == 1 and batch == 2:
                os._exit(CRASH)  # no cleanup, no callbacks: like a killed job

    callbacks: list = [Crash()]
    initial = 0
    if mode != "full":
        checkpoint = DataCheckpoint(train, directory, every=1)
        callbacks.insert(0, checkpoint)  # saves before the crash
        initial = checkpoint.initial_epoch
    model.fit(train, epochs=2, initial_epoch=initial, callbacks=callbacks, verbose=0)
    train.close()
    return {
        "backend": keras.backend.backend(),
        "initial_epoch": initial,
        "steps": len(train),
        "iterations": int(keras.ops.convert_to_numpy(model.optimizer.iterations)),
        "weights": [np.asarray(w, dtype="float64").ravel().tolist() for w in model.get_weights()],
    }


def main() -> None:
    """``kinds`` run one after another in this process (a crash: one kind), each in its own checkpoint
    directory ``dir/<kind>``: the imports, most of a run's time, are paid once per backend."""
    args = json.loads(sys.argv[1])
    results = {
        kind: run(kind, args["mode"], Path(args["data"]), str(Path(args["dir"]) / kind)) for kind in args["kinds"]
    }
    print("RESULT " + json.dumps(results), flush=True)


if __name__ == "__main__":
    main()
