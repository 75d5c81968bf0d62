"""Trains with a DataQualityMonitor on the backend named by ``KERAS_BACKEND``; prints ``RESULT {json}``.

    KERAS_BACKEND=jax python _quality_driver.py '{"dir": "/tmp/x", "seed": 1, "spe": 4, "softmax": false}'

Keras fixes its backend at import, so ``test_quality_monitor.py`` runs this
script once per backend. It writes (with pyarrow and Pillow, into ``dir``)
a synthetic classification table with 10 % of labels flipped at known ids,
the same table with clean labels, and a small image folder with a few
images filed under the wrong class, fits a small model on each with the
monitor, and reports what the monitor estimated and wrote.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import numpy as np

ROWS, CLASSES, FEATURES, FLIP = 6000, 4, 6, 0.10
BATCH, EPOCHS, SPREAD = 128, 5, 4.0  # class centres ~N(0, SPREAD^2) apart, unit noise: a Dense model learns ~99.5 %
IMAGE_CLASSES, IMAGES_PER_CLASS, IMAGES_MISFILED, IMAGES_DARK, SIDE = 3, 40, 12, 3, 16


def write_table(path: Path, seed: int, flip: float) -> list[int]:
    """Gaussian classes in FEATURES dimensions; returns the ids whose label was flipped to another class."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(CLASSES, FEATURES)) * SPREAD
    truth = rng.integers(0, CLASSES, ROWS)
    x = centres[truth] + rng.normal(size=(ROWS, FEATURES))
    flipped = np.sort(rng.choice(ROWS, int(round(flip * ROWS)), replace=False))
    given = truth.copy()
    given[flipped] = (truth[flipped] + rng.integers(1, CLASSES, len(flipped))) % CLASSES
    columns = {"id": np.arange(ROWS, dtype=np.int64), "label": given}
    columns.update({f"f{i}": x[:, i].astype("float32") for i in range(FEATURES)})
    pq.write_table(pa.table(columns), path, row_group_size=1000)
    return flipped.tolist()


def write_images(root: Path, seed: int) -> tuple[list[str], list[str]]:
    """Class c is brightest in channel c; returns (misfiled paths, near-black paths)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    misfiled, dark = [], []
    for label in range(IMAGE_CLASSES):
        (root / f"class{label}").mkdir(parents=True)
    for label in range(IMAGE_CLASSES):
        for index in range(IMAGES_PER_CLASS):
            pixels = rng.normal(70, 25, (SIDE, SIDE, 3))
            pixels[..., label] += 110
            folder = label
            if index < IMAGES_DARK:
                pixels *= 0.04  # near-black, still its class's colour
            elif index < IMAGES_DARK + IMAGES_MISFILED // IMAGE_CLASSES:
                folder = (label + 1) % IMAGE_CLASSES
            path = root / f"class{folder}" / f"img{label}-{index}.png"
            Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(path)
            (dark if index < IMAGES_DARK else misfiled if folder != label else []).append(str(path))
    return misfiled, dark


def table_run(path: Path, seed: int, *, every: int, spe: int, softmax: bool, suspects: Path, top: int | None) -> dict:
    import keras

    import streamfeed as sf

    keras.utils.set_random_seed(seed)
    train = sf.read_parquet(path).shuffle(seed=seed).batch(BATCH).to_keras(label="label", ids="id")
    model = keras.Sequential(
        [
            keras.Input((FEATURES,)),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(CLASSES, activation="softmax" if softmax else None),
        ]
    )
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=not softmax)
    model.compile(keras.optimizers.Adam(0.01), loss, steps_per_execution=spe)
    monitor = sf.keras.DataQualityMonitor(train, every=every)
    with train:
        history = model.fit(train, epochs=EPOCHS, verbose=0, callbacks=[monitor])
    written = monitor.write_suspects(suspects, top=top)
    return {
        "rate": monitor.noise_rate(),
        "logged_rates": [float(v) for v in history.history["label_noise_rate"]],
        "rows_measured": [h["rows_measured"] for h in monitor.history],
        "tracked": len(monitor.ledger),
        "written": written,
        "suspects": [json.loads(line) for line in suspects.read_text().splitlines()],
    }


def image_run(root: Path, seed: int, suspects: Path) -> dict:
    import keras

    import streamfeed as sf

    keras.utils.set_random_seed(seed)
    train = sf.read_images(root, size=(SIDE, SIDE)).shuffle(seed=seed).batch(16).to_keras(label="label", ids="path")
    model = keras.Sequential(
        [
            keras.Input((SIDE, SIDE, 3)),
            keras.layers.Rescaling(1 / 255),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(IMAGE_CLASSES),
        ]
    )
    model.compile(keras.optimizers.Adam(0.05), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    monitor = sf.keras.DataQualityMonitor(train)
    with train:
        history = model.fit(train, epochs=8, verbose=0, callbacks=[monitor])
    written = monitor.write_suspects(suspects, top=IMAGES_MISFILED)
    return {
        "rate": monitor.noise_rate(),
        "history": {key: [float(v) for v in values] for key, values in history.history.items()},
        "written": written,
        "suspects": [json.loads(line) for line in suspects.read_text().splitlines()],
    }


def main() -> None:
    args = json.loads(sys.argv[1])
    directory, seed = Path(args["dir"]), int(args["seed"])
    import keras

    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("streamfeed")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)

    flipped = write_table(directory / "noisy.parquet", seed, FLIP)
    write_table(directory / "clean.parquet", seed, 0.0)
    misfiled, dark = write_images(directory / "images", seed)
    result = {
        "backend": keras.backend.backend(),
        "flipped": flipped,
        "noisy": table_run(
            directory / "noisy.parquet",
            seed,
            every=1,
            spe=args["spe"],
            softmax=args["softmax"],
            suspects=directory / "noisy.jsonl",
            top=len(flipped),
        ),
        "clean": table_run(
            directory / "clean.parquet",
            seed,
            every=2,
            spe=1,
            softmax=args["softmax"],
            suspects=directory / "clean.jsonl",
            top=None,
        ),
        "misfiled": misfiled,
        "dark": dark,
        "images": image_run(directory / "images", seed, directory / "images.jsonl"),
        "log": records,
    }
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
