"""A real ``fit`` on token lists read as ragged rows from HDF5 (vlen dataset) and CSV (``list_columns``).

Each backend runs in its own process (Keras fixes its backend at import).
The same rows are written by h5py and by Python's ``csv`` module; batches
are padded to 40 (one shape: TensorFlow's adapter fixes the shape of the
first batch) and fed to an
``Embedding(mask_zero=True)`` + average-pooling model whose label is
learnable from the tokens, so the loss must fall on every backend.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import h5py
import numpy as np
import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")

_FIT = textwrap.dedent(
    """
    import json, sys
    import keras
    import streamfeed as sf

    h5, table = sys.argv[1], sys.argv[2]
    sources = {
        "hdf5": sf.read_hdf5(h5, rows_per_fragment=100),
        "csv": sf.read_csv(table, list_columns={"tok": (" ", "int32")}, fragment_bytes=4000, count_cache=False),
    }
    result = {"backend": keras.backend.backend()}
    for name, ds in sources.items():
        data = ds.shuffle(seed=1).batch(32, pad=sf.Pad(columns=["tok"], length=40, mark="none")).to_keras(
            features=["tok"], label="y", dtype="int32"
        )
        keras.utils.set_random_seed(0)
        model = keras.Sequential([
            keras.Input(shape=(None,), dtype="int32"),
            keras.layers.Embedding(1000, 8, mask_zero=True),
            keras.layers.GlobalAveragePooling1D(),
            keras.layers.Dense(1, activation="sigmoid"),
        ])
        model.compile(optimizer=keras.optimizers.Adam(0.02), loss="binary_crossentropy")
        history = model.fit(data, epochs=4, verbose=0)
        result[name] = {"steps": len(data), "loss": history.history["loss"]}
    print("RESULT " + json.dumps(result))
    """
)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> tuple[Path, Path, int]:
    """600 token lists of lengths 1..40; label: whether most ids are above 500."""
    rng = np.random.default_rng(3)
    rows = [rng.integers(1, 1000, size=int(rng.integers(1, 41))).astype(np.int32) for _ in range(600)]
    labels = np.array([float(np.mean(row > 500) > 0.5) for row in rows], dtype=np.float32)
    root = tmp_path_factory.mktemp("lists-fit")
    with h5py.File(root / "tok.h5", "w") as f:
        tok = f.create_dataset("tok", (len(rows),), dtype=h5py.vlen_dtype(np.int32), chunks=(50,))
        for index, row in enumerate(rows):
            tok[index] = row
        f["y"] = labels
    with open(root / "tok.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["tok", "y"])
        writer.writerows([" ".join(map(str, row.tolist())), float(label)] for row, label in zip(rows, labels))
    return root / "tok.h5", root / "tok.csv", len(rows)


@pytest.mark.parametrize("backend", ["jax", "tensorflow", "torch"])
def test_keras_fits_token_lists_from_hdf5_and_csv(files, backend):
    h5, table, rows = files
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": SRC}
    proc = subprocess.run(
        [sys.executable, "-c", _FIT, str(h5), str(table)],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    result = json.loads(lines[-1][len("RESULT ") :])
    assert result["backend"] == backend
    for name in ("hdf5", "csv"):
        loss = result[name]["loss"]
        assert result[name]["steps"] == -(-rows // 32), name
        assert all(np.isfinite(loss)) and loss[-1] < loss[0], (name, loss)
