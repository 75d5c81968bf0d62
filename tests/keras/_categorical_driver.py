"""Trains on a mixed-type table with dict inputs on the backend named by ``KERAS_BACKEND``.

    KERAS_BACKEND=jax python _categorical_driver.py '{"dir": "/tmp/x"}'

Writes a CSV with a numeric, a string (with nulls) and a date column,
computes stats, and fits a functional model whose inputs are named after
the columns: the string column through an ``Embedding`` sized by
``categorical_sizes``, the numeric ones standardized in the pipeline, one
of them fed as ``(batch,)`` to an ``Input(shape=(1,))``. Prints ``RESULT {json}``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


def write_csv(path: Path, rows: int = 600) -> None:
    rng = np.random.default_rng(0)
    cities = ["paris", "lyon", "nice", "brest"]
    lines = ["x,city,day,y"]
    for index in range(rows):
        city = cities[index % 4] if index % 13 else ""
        day = f"2026-{1 + index % 12:02d}-{1 + index % 28:02d}"
        lines.append(f"{rng.normal():.4f},{city},{day},{index % 2}")
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    args = json.loads(sys.argv[1])
    import keras

    import streamfeed as sf

    path = Path(args["dir"]) / "mixed.csv"
    write_csv(path)
    ds = sf.read_csv(path, nulls="fill", fill={"city": ""}).shuffle(seed=1).batch(64)
    stats = sf.compute_stats(ds)
    train = ds.to_keras(label="y", inputs="dict", categorical=stats, standardize=True)
    x_in = keras.Input(shape=(1,), name="x")
    city_in = keras.Input(shape=(), name="city", dtype="int32")
    day_in = keras.Input(shape=(1,), name="day")
    embedded = keras.layers.Embedding(train.categorical_sizes["city"], 3)(city_in)
    merged = keras.layers.Concatenate()([x_in, embedded, day_in])
    model = keras.Model([x_in, city_in, day_in], keras.layers.Dense(1, activation="sigmoid")(merged))
    model.compile(optimizer="adam", loss="binary_crossentropy")
    train.model = model
    history = model.fit(train, epochs=2, verbose=0)
    first = train.dataset.iter_epoch(0)
    with first:
        batch = next(first)
    print(
        "RESULT "
        + json.dumps(
            {
                "backend": keras.backend.backend(),
                "loss": [float(v) for v in history.history["loss"]],
                "sizes": train.categorical_sizes,
                "city_dtype": str(batch["__x__city"].dtype),
                "x_mean": float(np.mean(batch["__x__x"])),
                "day_dtype": str(batch["__x__day"].dtype),
            }
        )
    )


if __name__ == "__main__":
    main()
